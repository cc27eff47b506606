package hostpath

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// dataPath is the data (data/ or disk.img) of volume id in the test pool
// under dir, or of snapshot id when snap is true.
func dataPath(dir, id string, c *csi.VolumeCapability, snap bool) string {
	entry := dataDir
	if c.GetBlock() != nil {
		entry = diskFile
	}
	if snap {
		return filepath.Join(dir, "pool", snapshotsDir, id, entry)
	}
	return filepath.Join(dir, "pool", id, entry)
}

// content describes the data at p: for a directory every entry relative to
// it (type, mode, size, hash, link target), for a file its size and hash.
func content(t testing.TB, p string) string {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if !st.IsDir() {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d bytes sha256=%x", len(b), sha256.Sum256(b))
	}
	var lines []string
	for k, v := range snapshot(t, p) {
		r, _ := filepath.Rel(p, k)
		lines = append(lines, r+": "+v)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// writeVersion writes version v of a test volume's content at p: files
// (one sparse, one in a subdirectory) and a symlink in a data directory, or
// extents of a disk file (which keeps its size).
func writeVersion(t testing.TB, p string, block bool, v string) {
	t.Helper()
	data := bytes.Repeat([]byte(v), 64<<10)
	if block {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, off := range []int64{0, 5 << 20} {
			if _, err := f.WriteAt(data, off); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "a.txt"), []byte(v+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeSparse(t, filepath.Join(p, "sub", "sparse.bin"), 8<<20, extent{3 << 20, data})
	_ = os.Remove(filepath.Join(p, "link"))
	if err := os.Symlink("/etc/"+v, filepath.Join(p, "link")); err != nil {
		t.Fatal(err)
	}
}

func snapReq(name, source string) *csi.CreateSnapshotRequest {
	return &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: source}
}

func fromVolume(req *csi.CreateVolumeRequest, id string) *csi.CreateVolumeRequest {
	req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}
	return req
}

func fromSnapshot(req *csi.CreateVolumeRequest, id string) *csi.CreateVolumeRequest {
	req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: id}}}
	return req
}

// TestSnapshotCloneContent, for filesystem and block volumes: a snapshot
// keeps the content of its source at the time it was taken (later writes
// to the source do not reach it), a volume restored from it has that
// content, a clone has the source's current content and a larger clone
// too (zero-extended), writes to a clone do not reach its source, and
// deleting everything leaves the pool empty.
func TestSnapshotCloneContent(t *testing.T) {
	for _, tc := range []struct {
		name string
		cap  *csi.VolumeCapability
	}{{"filesystem", mountCap()}, {"block", blockCap()}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d := startDriver(t, testOptions(dir))
			ctx := context.Background()
			block := tc.cap.GetBlock() != nil
			const size = 8 << 20
			if _, err := d.controller().CreateVolume(ctx, createReq("src", size, tc.cap)); err != nil {
				t.Fatal(err)
			}
			srcData := dataPath(dir, "src", tc.cap, false)
			writeVersion(t, srcData, block, "v1")
			v1 := content(t, srcData)

			snap, err := d.controller().CreateSnapshot(ctx, snapReq("snap", "src"))
			if err != nil {
				t.Fatal(err)
			}
			if s := snap.GetSnapshot(); !s.GetReadyToUse() || s.GetSizeBytes() != size || s.GetSourceVolumeId() != "src" || s.GetSnapshotId() != "snap" || s.GetCreationTime().AsTime().IsZero() {
				t.Errorf("CreateSnapshot = %v, want ready, %d bytes, of src, with a creation time", s, size)
			}
			writeVersion(t, srcData, block, "v2")
			v2 := content(t, srcData)
			if v1 == v2 {
				t.Fatal("test bug: v1 and v2 have the same content")
			}
			if got := content(t, dataPath(dir, "snap", tc.cap, true)); got != v1 {
				t.Errorf("snapshot after a write to its source:\n%s\nwant (v1):\n%s", got, v1)
			}

			restored, err := d.controller().CreateVolume(ctx, fromSnapshot(createReq("restored", size, tc.cap), "snap"))
			if err != nil {
				t.Fatal(err)
			}
			if got := restored.GetVolume().GetContentSource().GetSnapshot().GetSnapshotId(); got != "snap" {
				t.Errorf("restored volume's content source = %v, want snapshot snap", restored.GetVolume().GetContentSource())
			}
			if got := content(t, dataPath(dir, "restored", tc.cap, false)); got != v1 {
				t.Errorf("restored volume:\n%s\nwant (v1):\n%s", got, v1)
			}

			clone, err := d.controller().CreateVolume(ctx, fromVolume(createReq("clone", 0, tc.cap), "src"))
			if err != nil {
				t.Fatal(err)
			}
			if clone.GetVolume().GetCapacityBytes() != size || clone.GetVolume().GetContentSource().GetVolume().GetVolumeId() != "src" {
				t.Errorf("clone without a capacity range = %v, want the source's %d bytes and source src", clone.GetVolume(), size)
			}
			cloneData := dataPath(dir, "clone", tc.cap, false)
			if got := content(t, cloneData); got != v2 {
				t.Errorf("clone:\n%s\nwant (v2):\n%s", got, v2)
			}
			writeVersion(t, cloneData, block, "v3")
			if got := content(t, srcData); got != v2 {
				t.Errorf("source after a write to its clone:\n%s\nwant (v2):\n%s", got, v2)
			}

			big, err := d.controller().CreateVolume(ctx, fromVolume(createReq("big", 2*size, tc.cap), "src"))
			if err != nil {
				t.Fatal(err)
			}
			if big.GetVolume().GetCapacityBytes() != 2*size {
				t.Errorf("larger clone capacity %d, want %d", big.GetVolume().GetCapacityBytes(), 2*size)
			}
			bigData := dataPath(dir, "big", tc.cap, false)
			if block {
				b, _ := os.ReadFile(bigData)
				s, _ := os.ReadFile(srcData)
				if len(b) != 2*size || !bytes.Equal(b[:size], s) || bytes.ContainsFunc(b[size:], func(r rune) bool { return r != 0 }) {
					t.Errorf("larger block clone: %d bytes, want %d: the source's then zeros", len(b), 2*size)
				}
			} else if got := content(t, bigData); got != v2 {
				t.Errorf("larger clone:\n%s\nwant (v2):\n%s", got, v2)
			}

			if _, err := d.controller().DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "snap"}); err != nil {
				t.Fatal(err)
			}
			if got := content(t, dataPath(dir, "restored", tc.cap, false)); got != v1 {
				t.Errorf("restored volume after its snapshot was deleted changed:\n%s", got)
			}
			for _, id := range []string{"src", "restored", "clone", "big"} {
				if _, err := d.controller().DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
					t.Fatal(err)
				}
			}
			if entries, _ := os.ReadDir(filepath.Join(dir, "pool")); len(entries) != 0 {
				t.Errorf("pool after deleting everything: %v", entries)
			}
		})
	}
}

// TestSnapshotCloneErrors checks the CSI codes of snapshot and clone
// requests that cannot be served, and of repeated requests.
func TestSnapshotCloneErrors(t *testing.T) {
	dir := t.TempDir()
	d := startDriver(t, testOptions(dir))
	ctx := context.Background()
	c := d.controller()
	for _, req := range []*csi.CreateVolumeRequest{createReq("fs", 4<<20, mountCap()), createReq("blk", 4<<20, blockCap()), createReq("plain", 4<<20, mountCap())} {
		if _, err := c.CreateVolume(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*csi.CreateSnapshotRequest{snapReq("fs-snap", "fs"), snapReq("blk-snap", "blk")} {
		if _, err := c.CreateSnapshot(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateVolume(ctx, fromVolume(createReq("fs-clone", 4<<20, mountCap()), "fs")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"clone of a missing volume", func() error {
			_, err := c.CreateVolume(ctx, fromVolume(createReq("x1", 4<<20, mountCap()), "missing"))
			return err
		}, codes.NotFound},
		{"restore of a missing snapshot", func() error {
			_, err := c.CreateVolume(ctx, fromSnapshot(createReq("x2", 4<<20, mountCap()), "missing"))
			return err
		}, codes.NotFound},
		{"clone of a malformed ID", func() error {
			_, err := c.CreateVolume(ctx, fromVolume(createReq("x3", 4<<20, mountCap()), "../fs"))
			return err
		}, codes.InvalidArgument},
		{"restore of a malformed ID", func() error {
			_, err := c.CreateVolume(ctx, fromSnapshot(createReq("x4", 4<<20, mountCap()), "../fs-snap"))
			return err
		}, codes.InvalidArgument},
		{"clone with an empty source ID", func() error {
			_, err := c.CreateVolume(ctx, fromVolume(createReq("x5", 4<<20, mountCap()), ""))
			return err
		}, codes.InvalidArgument},
		{"block clone of a filesystem volume", func() error {
			_, err := c.CreateVolume(ctx, fromVolume(createReq("x6", 4<<20, blockCap()), "fs"))
			return err
		}, codes.InvalidArgument},
		{"filesystem restore of a block snapshot", func() error {
			_, err := c.CreateVolume(ctx, fromSnapshot(createReq("x7", 4<<20, mountCap()), "blk-snap"))
			return err
		}, codes.InvalidArgument},
		{"clone smaller than its source", func() error {
			req := fromVolume(createReq("x8", 1<<20, blockCap()), "blk")
			req.CapacityRange.LimitBytes = 1 << 20
			_, err := c.CreateVolume(ctx, req)
			return err
		}, codes.OutOfRange},
		{"clone request below the source's size, no limit: source size", func() error {
			resp, err := c.CreateVolume(ctx, fromVolume(createReq("x9", 1<<20, blockCap()), "blk"))
			if err == nil && resp.GetVolume().GetCapacityBytes() != 4<<20 {
				return fmt.Errorf("capacity %d, want the source's %d", resp.GetVolume().GetCapacityBytes(), 4<<20)
			}
			return err
		}, codes.OK},
		{"same clone again", func() error {
			_, err := c.CreateVolume(ctx, fromVolume(createReq("fs-clone", 4<<20, mountCap()), "fs"))
			return err
		}, codes.OK},
		{"existing name, other source", func() error {
			_, err := c.CreateVolume(ctx, fromVolume(createReq("fs-clone", 4<<20, mountCap()), "plain"))
			return err
		}, codes.AlreadyExists},
		{"existing plain volume as a clone", func() error {
			_, err := c.CreateVolume(ctx, fromVolume(createReq("plain", 4<<20, mountCap()), "fs"))
			return err
		}, codes.AlreadyExists},
		{"snapshot of a missing volume", func() error { _, err := c.CreateSnapshot(ctx, snapReq("s1", "missing")); return err }, codes.NotFound},
		{"snapshot of a malformed volume ID", func() error { _, err := c.CreateSnapshot(ctx, snapReq("s2", "../fs")); return err }, codes.InvalidArgument},
		{"snapshot with a malformed name", func() error { _, err := c.CreateSnapshot(ctx, snapReq("../s3", "fs")); return err }, codes.InvalidArgument},
		{"snapshot without a name", func() error { _, err := c.CreateSnapshot(ctx, snapReq("", "fs")); return err }, codes.InvalidArgument},
		{"snapshot without a source", func() error { _, err := c.CreateSnapshot(ctx, snapReq("s4", "")); return err }, codes.InvalidArgument},
		{"snapshot with an unknown parameter", func() error {
			req := snapReq("s5", "fs")
			req.Parameters = map[string]string{"storagePool": "local"}
			_, err := c.CreateSnapshot(ctx, req)
			return err
		}, codes.InvalidArgument},
		{"same snapshot again", func() error { _, err := c.CreateSnapshot(ctx, snapReq("fs-snap", "fs")); return err }, codes.OK},
		{"existing snapshot name, other source", func() error { _, err := c.CreateSnapshot(ctx, snapReq("fs-snap", "blk")); return err }, codes.AlreadyExists},
		{"GetSnapshot of a missing snapshot", func() error {
			_, err := c.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: "missing"})
			return err
		}, codes.NotFound},
		{"DeleteSnapshot of a missing snapshot", func() error {
			_, err := c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "missing"})
			return err
		}, codes.OK},
		{"DeleteSnapshot of a malformed ID", func() error {
			_, err := c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "../fs-snap"})
			return err
		}, codes.InvalidArgument},
		{"ListSnapshots with a foreign token", func() error {
			_, err := c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: "bogus"})
			return err
		}, codes.Aborted},
	} {
		if err := tc.call(); status.Code(err) != tc.want {
			t.Errorf("%s: %v, want code %v", tc.name, err, tc.want)
		}
	}
}

// TestListSnapshots pages through snapshots of two volumes and filters
// them by snapshot and source volume.
func TestListSnapshots(t *testing.T) {
	d := startDriver(t, testOptions(t.TempDir()))
	ctx := context.Background()
	c := d.controller()
	want := map[string]string{} // snapshot -> source
	for _, v := range []string{"vol-a", "vol-b"} {
		if _, err := c.CreateVolume(ctx, createReq(v, 1<<20, mountCap())); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			s := fmt.Sprintf("snap-%s-%d", v, i)
			if _, err := c.CreateSnapshot(ctx, snapReq(s, v)); err != nil {
				t.Fatal(err)
			}
			want[s] = v
		}
	}
	got := map[string]string{}
	token, pages := "", 0
	for {
		resp, err := c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: 4, StartingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range resp.GetEntries() {
			got[e.GetSnapshot().GetSnapshotId()] = e.GetSnapshot().GetSourceVolumeId()
		}
		if token = resp.GetNextToken(); token == "" {
			break
		}
	}
	if !maps.Equal(got, want) || pages != 2 {
		t.Errorf("ListSnapshots in pages of 4: %v in %d pages, want %v in 2", got, pages, want)
	}
	for _, tc := range []struct {
		req  *csi.ListSnapshotsRequest
		want []string
	}{
		{&csi.ListSnapshotsRequest{SnapshotId: "snap-vol-b-1"}, []string{"snap-vol-b-1"}},
		{&csi.ListSnapshotsRequest{SnapshotId: "snap-vol-b-1", SourceVolumeId: "vol-a"}, nil},
		{&csi.ListSnapshotsRequest{SourceVolumeId: "vol-a"}, []string{"snap-vol-a-0", "snap-vol-a-1", "snap-vol-a-2"}},
		{&csi.ListSnapshotsRequest{SourceVolumeId: "vol-a", MaxEntries: 2}, []string{"snap-vol-a-0", "snap-vol-a-1"}},
		{&csi.ListSnapshotsRequest{SnapshotId: "missing"}, nil},
		{&csi.ListSnapshotsRequest{SnapshotId: "../etc"}, nil},
	} {
		resp, err := c.ListSnapshots(ctx, tc.req)
		if err != nil {
			t.Fatalf("ListSnapshots(%v): %v", tc.req, err)
		}
		var ids []string
		for _, e := range resp.GetEntries() {
			ids = append(ids, e.GetSnapshot().GetSnapshotId())
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("ListSnapshots(%v) = %v, want %v", tc.req, ids, tc.want)
		}
	}
}
