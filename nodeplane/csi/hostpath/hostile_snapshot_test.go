package hostpath

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// plantInStore makes <pool>/.snapshots a real directory holding the same
// symlinks out of the pool as newHostileFixture plants in the pool.
func plantInStore(t testing.TB, f hostileFixture) {
	t.Helper()
	store := filepath.Join(f.pool, snapshotsDir)
	if err := os.Mkdir(store, 0o750); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"escape":        f.outside,
		"escape-rel":    "../../outside",
		"escape-file":   filepath.Join(f.outside, "victim.txt"),
		"escape-dotdot": "..",
	} {
		if err := os.Symlink(target, filepath.Join(store, link)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHostileSnapshotIDs sends every hostile ID as a snapshot name, a
// snapshot ID and a snapshot's source volume ID through every snapshot RPC
// and as a restore source, over the real socket, with symlinks out of the
// pool planted in the snapshot store under the valid names: the CSI codes
// are those of ValidateSnapshotID, planted entries are never followed or
// removed, and nothing outside the pool changes.
func TestHostileSnapshotIDs(t *testing.T) {
	f := newHostileFixture(t)
	opts := testOptions(t.TempDir())
	opts.Pools[0].Path = f.pool
	d := startDriver(t, opts)
	ctx := context.Background()
	c := d.controller()
	if _, err := c.CreateVolume(ctx, createReq("src", 1<<20, mountCap())); err != nil {
		t.Fatal(err)
	}
	plantInStore(t, f)
	before := f.outsideSnapshot(t)
	planted := map[string]bool{}
	for _, l := range plantedLinks {
		planted[l] = true
	}
	for _, tc := range hostileIDs {
		if !isUTF8(tc.id) {
			continue // the gRPC client refuses it (see FuzzSnapshotID)
		}
		check := func(rpc string, err error, want codes.Code) {
			t.Helper()
			if got := status.Code(err); got != want {
				t.Errorf("%s(%q) = %v, want code %v", rpc, tc.id, err, want)
			}
		}
		pick := func(invalid, plantedCode, ok codes.Code) codes.Code {
			switch {
			case !tc.valid:
				return invalid
			case planted[tc.id]:
				return plantedCode
			}
			return ok
		}
		_, err := c.CreateSnapshot(ctx, snapReq(tc.id, "src"))
		check("CreateSnapshot", err, pick(codes.InvalidArgument, codes.AlreadyExists, codes.OK))
		_, err = c.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: tc.id})
		check("GetSnapshot", err, pick(codes.InvalidArgument, codes.NotFound, codes.OK))
		if tc.id != "" { // an empty snapshot_id is no filter
			list, err := c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: tc.id})
			check("ListSnapshots", err, codes.OK)
			if n := len(list.GetEntries()); n != map[bool]int{true: 1}[tc.valid && !planted[tc.id]] {
				t.Errorf("ListSnapshots(%q) = %d entries", tc.id, n)
			}
		}
		_, err = c.CreateVolume(ctx, fromSnapshot(createReq("restored", 1<<20, mountCap()), tc.id))
		check("CreateVolume from snapshot", err, pick(codes.InvalidArgument, codes.NotFound, codes.OK))
		if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "restored"}); err != nil {
			t.Fatal(err)
		}
		_, err = c.CreateSnapshot(ctx, snapReq("of-hostile-source", tc.id))
		check("CreateSnapshot of source", err, pick(codes.InvalidArgument, codes.NotFound, codes.NotFound))
		_, err = c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: tc.id})
		check("DeleteSnapshot", err, pick(codes.InvalidArgument, codes.OK, codes.OK))
		if diff := before.diff(f.outsideSnapshot(t)); diff != "" {
			t.Fatalf("after the calls for %q, outside the pool:\n%s", tc.id, diff)
		}
	}
	for _, l := range plantedLinks {
		if _, err := os.Lstat(filepath.Join(f.pool, snapshotsDir, l)); err != nil {
			t.Errorf("planted symlink %s/%s: %v (the driver removed a file that is not its snapshot)", snapshotsDir, l, err)
		}
	}
	list, err := c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{})
	if err != nil || len(list.GetEntries()) != 0 {
		t.Errorf("ListSnapshots after deleting everything = %v, %v; want none (planted links are not snapshots)", list, err)
	}
}

// TestPlantedSnapshotStore replaces <pool>/.snapshots by a symlink, out of
// the pool or to a volume's data directory (which a pod writes): every
// snapshot RPC and a restore is FailedPrecondition, and nothing changes in
// the pool or outside it.
func TestPlantedSnapshotStore(t *testing.T) {
	for _, target := range []string{"outside", "../outside", "vol/data"} {
		t.Run(strings.ReplaceAll(target, "/", "_"), func(t *testing.T) {
			f := newHostileFixture(t)
			opts := testOptions(t.TempDir())
			opts.Pools[0].Path = f.pool
			d := startDriver(t, opts)
			ctx := context.Background()
			c := d.controller()
			if _, err := c.CreateVolume(ctx, createReq("vol", 1<<20, mountCap())); err != nil {
				t.Fatal(err)
			}
			link := target
			if target == "outside" {
				link = f.outside
			}
			if err := os.Symlink(link, filepath.Join(f.pool, snapshotsDir)); err != nil {
				t.Fatal(err)
			}
			// What a pod could put there to be taken for a snapshot.
			if err := os.MkdirAll(filepath.Join(f.pool, "vol", "data", "snap", "data"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(f.pool, "vol", "data", "snap", metaFile), []byte(`{"id":"snap","pool":"local","state":"Ready","accessType":"mount","sourceVolumeId":"vol"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, f.base)
			for name, call := range map[string]func() error{
				"CreateSnapshot": func() error { _, err := c.CreateSnapshot(ctx, snapReq("new", "vol")); return err },
				"GetSnapshot": func() error {
					_, err := c.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: "snap"})
					return err
				},
				"ListSnapshots": func() error { _, err := c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{}); return err },
				"DeleteSnapshot": func() error {
					_, err := c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "snap"})
					return err
				},
				"CreateVolume from snapshot": func() error {
					_, err := c.CreateVolume(ctx, fromSnapshot(createReq("restored", 1<<20, mountCap()), "snap"))
					return err
				},
			} {
				if err := call(); status.Code(err) != codes.FailedPrecondition {
					t.Errorf("%s with %s -> %s = %v, want FailedPrecondition", name, snapshotsDir, target, err)
				}
			}
			if diff := before.diff(snapshot(t, f.base)); diff != "" {
				t.Fatalf("after snapshot calls with a planted store:\n%s", diff)
			}
		})
	}
}

// FuzzSnapshotID takes and deletes a snapshot named by arbitrary bytes,
// restores a volume from it and takes a snapshot of a volume of that ID,
// calling the controller in-process (no gRPC UTF-8 check), with symlinks
// planted in the snapshot store. It asserts: an ID ValidateSnapshotID
// refuses is InvalidArgument and touches nothing; an accepted one creates
// exactly <pool>/.snapshots/<id> (or AlreadyExists for a planted entry),
// restores, and DeleteSnapshot removes it again; nothing in or outside the
// pool changes in the end. `go test` runs the seeds; `go test -fuzz
// FuzzSnapshotID` explores.
func FuzzSnapshotID(f *testing.F) {
	for _, tc := range hostileIDs {
		f.Add(tc.id)
	}
	fx := newHostileFixture(f)
	cs := fuzzController(f, fx.pool)
	ctx := context.Background()
	if _, err := cs.CreateVolume(ctx, createReq("src", 4096, mountCap())); err != nil {
		f.Fatal(err)
	}
	plantInStore(f, fx)
	before := fx.outsideSnapshot(f)
	// The store's mtime changes with every snapshot taken and deleted.
	poolState := func(t testing.TB) fsSnapshot {
		s := snapshot(t, fx.pool)
		store := filepath.Join(fx.pool, snapshotsDir)
		s[store], _, _ = strings.Cut(s[store], " mtime=")
		return s
	}
	poolBefore := poolState(f)
	planted := map[string]bool{}
	for _, l := range plantedLinks {
		planted[l] = true
	}
	f.Fuzz(func(t *testing.T, id string) {
		verr := ValidateSnapshotID(id)
		if verr == nil && (strings.ContainsAny(id, "/\x00") || id == "." || id == ".." || len(id) > MaxVolumeIDLength) {
			t.Fatalf("ValidateSnapshotID(%q) accepted a path-like ID", id)
		}
		if (verr == nil) != (ValidateVolumeID(id) == nil) {
			t.Fatalf("ValidateSnapshotID(%q) = %v but ValidateVolumeID = %v: one rule for both", id, verr, ValidateVolumeID(id))
		}
		_, err := cs.CreateSnapshot(ctx, snapReq(id, "src"))
		switch {
		case verr != nil:
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("CreateSnapshot(%q) = %v, want InvalidArgument (%v)", id, err, verr)
			}
		case planted[id]:
			if status.Code(err) != codes.AlreadyExists {
				t.Fatalf("CreateSnapshot(%q) = %v, want AlreadyExists for a planted entry", id, err)
			}
		default:
			if err != nil {
				t.Fatalf("CreateSnapshot(%q) = %v", id, err)
			}
			if st, err := os.Lstat(filepath.Join(fx.pool, snapshotsDir, id, metaFile)); err != nil || !st.Mode().IsRegular() {
				t.Fatalf("CreateSnapshot(%q): no %s in <pool>/%s/%s: %v", id, metaFile, snapshotsDir, id, err)
			}
			if _, err := cs.CreateVolume(ctx, fromSnapshot(createReq("fuzz-restored", 4096, mountCap()), id)); err != nil {
				t.Fatalf("CreateVolume from snapshot %q: %v", id, err)
			}
			if _, err := cs.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "fuzz-restored"}); err != nil {
				t.Fatal(err)
			}
		}
		_, err = cs.CreateSnapshot(ctx, snapReq("fuzz-of-source", id))
		if want := map[bool]codes.Code{true: codes.NotFound, false: codes.InvalidArgument}[ValidateVolumeID(id) == nil]; status.Code(err) != want && id != "src" && id != "fuzz-of-source" {
			t.Fatalf("CreateSnapshot of source volume %q = %v, want %v", id, err, want)
		}
		_, _ = cs.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "fuzz-of-source"})
		_, err = cs.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: id})
		if want := map[bool]codes.Code{true: codes.OK, false: codes.InvalidArgument}[verr == nil]; status.Code(err) != want {
			t.Fatalf("DeleteSnapshot(%q) = %v, want %v", id, err, want)
		}
		if diff := before.diff(fx.outsideSnapshot(t)); diff != "" {
			t.Fatalf("after the snapshot calls for %q, outside the pool:\n%s", id, diff)
		}
		if diff := poolBefore.diff(poolState(t)); diff != "" {
			t.Fatalf("after the snapshot calls for %q, the pool:\n%s", id, diff)
		}
	})
}
