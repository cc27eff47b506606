package hostpath

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLookupVolume creates a filesystem and a block volume through the
// driver's Controller service (no root needed), then checks LookupVolume
// resolves them to the driver's layout and refuses every tampered or
// hostile case with the right error class, without creating anything.
func TestLookupVolume(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir)
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	pool := opts.Pools[0]
	ctx := context.Background()
	for _, r := range []struct {
		id  string
		blk bool
	}{{"fs", false}, {"blk", true}, {"creating", false}, {"foreign", false}, {"dirlink", false}, {"datalink", false}, {"disklink", true}} {
		c := mountCap()
		if r.blk {
			c = blockCap()
		}
		if _, err := d.Controller().CreateVolume(ctx, createReq(r.id, 1<<20, c)); err != nil {
			t.Fatalf("CreateVolume %s: %v", r.id, err)
		}
	}
	// Tamper with some of them as a hostile pod or admin could.
	outside := filepath.Join(dir, "outside")
	if err := os.MkdirAll(filepath.Join(outside, "data"), 0o750); err != nil {
		t.Fatal(err)
	}
	editMeta := func(id string, f func(*volumeMeta)) {
		p := filepath.Join(pool.Path, id, metaFile)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var m volumeMeta
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		f(&m)
		b, _ = json.Marshal(m)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	editMeta("creating", func(m *volumeMeta) { m.State = stateCreating })
	editMeta("foreign", func(m *volumeMeta) { m.ID = "fs" })
	replaceWithSymlink := func(p, target string) {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	// The whole volume directory, then only its data, point out of the pool.
	data, _ := os.ReadFile(filepath.Join(pool.Path, "dirlink", metaFile))
	if err := os.WriteFile(filepath.Join(outside, metaFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	replaceWithSymlink(filepath.Join(pool.Path, "dirlink"), outside)
	replaceWithSymlink(filepath.Join(pool.Path, "datalink", dataDir), filepath.Join(outside, "data"))
	replaceWithSymlink(filepath.Join(pool.Path, "disklink", diskFile), "/etc/passwd")

	for _, tc := range []struct {
		id      string
		want    VolumeData
		errIs   error  // nil: success expected unless errText is set
		errText string // substring of the error
	}{
		{id: "fs", want: VolumeData{Path: filepath.Join(pool.Path, "fs", "data"), CapacityBytes: 1 << 20}},
		{id: "blk", want: VolumeData{Path: filepath.Join(pool.Path, "blk", "disk.img"), Block: true, CapacityBytes: 1 << 20}},
		{id: "missing", errIs: fs.ErrNotExist, errText: "storage pool local: volume missing"},
		{id: "creating", errIs: ErrNotVolume, errText: "is Creating, expected Ready"},
		{id: "foreign", errIs: ErrNotVolume, errText: `names volume "fs"`},
		{id: "dirlink", errIs: ErrNotVolume, errText: "volume dirlink"},
		{id: "datalink", errIs: ErrNotVolume, errText: "data is a L"},
		{id: "disklink", errIs: ErrNotVolume, errText: "disk.img is a L"},
		{id: "../outside", errText: "not allowed"},
		{id: "/etc", errText: "not allowed"},
		{id: "", errText: "volume ID: required"},
		{id: "a\x00b", errText: "not allowed"},
	} {
		t.Run(strings.ReplaceAll(tc.id, "/", "_"), func(t *testing.T) {
			got, err := LookupVolume(pool, tc.id)
			if tc.errIs == nil && tc.errText == "" {
				if err != nil || got != tc.want {
					t.Fatalf("LookupVolume(%q) = %+v, %v; want %+v", tc.id, got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("LookupVolume(%q) = %+v, want an error", tc.id, got)
			}
			if tc.errIs != nil && !errors.Is(err, tc.errIs) {
				t.Errorf("LookupVolume(%q) error %v, want one wrapping %v", tc.id, err, tc.errIs)
			}
			if !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("LookupVolume(%q) error %q, want it to contain %q", tc.id, err, tc.errText)
			}
		})
	}
	// A pool directory that does not exist is reported, not created.
	gone := Pool{Name: "gone", Path: filepath.Join(dir, "gone")}
	if _, err := LookupVolume(gone, "fs"); err == nil || !strings.Contains(err.Error(), "storage pool gone") {
		t.Errorf("LookupVolume in a missing pool: %v, want an error naming the pool", err)
	}
	if _, err := os.Stat(gone.Path); !os.IsNotExist(err) {
		t.Errorf("LookupVolume created the missing pool directory (stat: %v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "outside", "data", "disk.img")); !os.IsNotExist(err) {
		t.Errorf("something was written outside the pool (stat: %v)", err)
	}
}
