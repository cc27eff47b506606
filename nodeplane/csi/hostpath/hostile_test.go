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

func mountCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func blockCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func createReq(name string, size int64, c *csi.VolumeCapability) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{c}, CapacityRange: &csi.CapacityRange{RequiredBytes: size}}
}

// hostileIDs are volume IDs and names that must never reach outside the
// pool, with whether ValidateVolumeID accepts them.
var hostileIDs = []struct {
	id    string
	valid bool
}{
	{"../x", false},
	{"../outside", false},
	{"..", false},
	{".", false},
	{"", false},
	{"/etc/passwd", false},
	{"/tmp", false},
	{"a/../../outside", false},
	{"a/b", false},
	{"./x", false},
	{"x/", false},
	{"x\x00y", false},
	{"\x00", false},
	{strings.Repeat("a", MaxVolumeIDLength+1), false},
	{strings.Repeat("a", 4096), false},
	{".hidden", false},
	{"-flag", false},
	{"x y", false},
	{"x\\y", false},
	{"ü", false},
	{"\xff", false},
	{"pvc-9f1c2f0e-4d7a-4f55-9a52-3c1e8e7d9b10", true},
	{strings.Repeat("a", MaxVolumeIDLength), true},
	{"a..b", true},
	{"escape", true},
	{"escape-rel", true},
	{"escape-file", true},
	{"escape-dotdot", true},
}

// TestValidateVolumeID checks the accept/reject table, and that an accepted
// ID is always exactly one path element under any directory.
func TestValidateVolumeID(t *testing.T) {
	for _, tc := range hostileIDs {
		err := ValidateVolumeID(tc.id)
		if (err == nil) != tc.valid {
			t.Errorf("ValidateVolumeID(%q) = %v, want valid=%v", tc.id, err, tc.valid)
		}
		if err == nil && filepath.Join("/pool", tc.id) != "/pool/"+tc.id {
			t.Errorf("ValidateVolumeID(%q) accepted an ID that is not one path element", tc.id)
		}
	}
}

// TestHostileVolumeIDs sends every hostile ID through every RPC taking a
// volume ID or name, over the real socket, and checks the CSI codes and that
// nothing outside the pool changed; the planted symlinks are neither
// followed nor removed.
func TestHostileVolumeIDs(t *testing.T) {
	f := newHostileFixture(t)
	opts := testOptions(t.TempDir())
	opts.Pools[0].Path = f.pool
	d := startDriver(t, opts)
	before := f.outsideSnapshot(t)
	ctx := context.Background()
	planted := map[string]bool{}
	for _, l := range plantedLinks {
		planted[l] = true
	}
	for _, tc := range hostileIDs {
		if !isUTF8(tc.id) {
			continue // protobuf strings must be UTF-8: the client refuses to send it (see FuzzVolumeID)
		}
		const wantInvalid = codes.InvalidArgument
		check := func(rpc string, err error, want codes.Code) {
			t.Helper()
			if got := status.Code(err); got != want {
				t.Errorf("%s(%q) = %v, want code %v", rpc, tc.id, err, want)
			}
		}
		_, err := d.controller().CreateVolume(ctx, createReq(tc.id, 4096, mountCap()))
		switch {
		case !tc.valid:
			check("CreateVolume", err, wantInvalid)
		case planted[tc.id]:
			check("CreateVolume", err, codes.AlreadyExists)
		default:
			check("CreateVolume", err, codes.OK)
		}
		_, err = d.controller().ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: tc.id, VolumeCapabilities: []*csi.VolumeCapability{mountCap()}})
		switch {
		case !tc.valid:
			check("ValidateVolumeCapabilities", err, wantInvalid)
		case planted[tc.id]:
			check("ValidateVolumeCapabilities", err, codes.NotFound)
		default:
			check("ValidateVolumeCapabilities", err, codes.OK)
		}
		_, err = d.node().NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: tc.id, VolumePath: filepath.Join(f.outside, "x")})
		switch {
		case !tc.valid:
			check("NodeGetVolumeStats", err, wantInvalid)
		default:
			check("NodeGetVolumeStats", err, codes.NotFound)
		}
		_, err = d.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: tc.id, TargetPath: filepath.Join(f.outside, "x")})
		switch {
		case !tc.valid:
			check("NodeUnpublishVolume", err, wantInvalid)
		case planted[tc.id]:
			check("NodeUnpublishVolume", err, codes.NotFound)
		default:
			check("NodeUnpublishVolume", err, codes.OK) // not published there: nothing to do
		}
		_, err = d.controller().DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: tc.id})
		if !tc.valid {
			check("DeleteVolume", err, wantInvalid)
		} else {
			check("DeleteVolume", err, codes.OK)
		}
		if diff := before.diff(f.outsideSnapshot(t)); diff != "" {
			t.Fatalf("after the calls for %q, outside the pool:\n%s", tc.id, diff)
		}
	}
	for _, l := range plantedLinks {
		if _, err := os.Lstat(filepath.Join(f.pool, l)); err != nil {
			t.Errorf("planted symlink %s: %v (the driver removed a file that is not its volume)", l, err)
		}
	}
	list, err := d.controller().ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetEntries()) != 0 {
		t.Errorf("ListVolumes after deleting everything = %v, want none (planted links are not volumes)", list.GetEntries())
	}
}

func isUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestPlantedDataSymlink replaces a volume's data directory and disk file
// by symlinks out of the pool: publishing them fails (root only: it would
// otherwise bind-mount), deleting the volumes removes the links only.
func TestPlantedDataSymlink(t *testing.T) {
	f := newHostileFixture(t)
	opts := testOptions(t.TempDir())
	opts.Pools[0].Path = f.pool
	d := startDriver(t, opts)
	ctx := context.Background()
	for _, tc := range []struct {
		name, entry, target string
		cap                 *csi.VolumeCapability
	}{
		{"fs-vol", dataDir, f.outside, mountCap()},
		{"fs-vol-rel", dataDir, "../escape-rel", mountCap()},
		{"block-vol", diskFile, filepath.Join(f.outside, "victim.txt"), blockCap()},
	} {
		if _, err := d.controller().CreateVolume(ctx, createReq(tc.name, 1<<20, tc.cap)); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(f.pool, tc.name, tc.entry)
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(tc.target, p); err != nil {
			t.Fatal(err)
		}
	}
	before := f.outsideSnapshot(t)
	if os.Geteuid() == 0 {
		for _, tc := range []struct {
			name string
			cap  *csi.VolumeCapability
		}{{"fs-vol", mountCap()}, {"fs-vol-rel", mountCap()}, {"block-vol", blockCap()}} {
			target := filepath.Join(t.TempDir(), "target")
			_, err := d.node().NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: tc.name, TargetPath: target, VolumeCapability: tc.cap})
			if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "not a volume directory") {
				t.Errorf("NodePublishVolume(%s) with a planted symlink = %v, want Internal naming the entry", tc.name, err)
			}
			if mounted, _ := isMounted(target); mounted {
				t.Errorf("NodePublishVolume(%s) left %s mounted", tc.name, target)
			}
		}
	}
	for _, id := range []string{"fs-vol", "fs-vol-rel", "block-vol"} {
		if _, err := d.controller().DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatalf("DeleteVolume(%s): %v", id, err)
		}
		if _, err := os.Lstat(filepath.Join(f.pool, id)); !os.IsNotExist(err) {
			t.Errorf("DeleteVolume(%s) left its directory: %v", id, err)
		}
	}
	if diff := before.diff(f.outsideSnapshot(t)); diff != "" {
		t.Fatalf("outside the pool:\n%s", diff)
	}
}

// TestPoolReplacedBySymlink moves the pool directory away and puts a
// symlink out of the pool in its place while the driver runs: every call is
// refused with FailedPrecondition, Probe reports not ready, and nothing
// changes outside the pool or in the moved pool.
func TestPoolReplacedBySymlink(t *testing.T) {
	f := newHostileFixture(t)
	opts := testOptions(t.TempDir())
	opts.Pools[0].Path = f.pool
	d := startDriver(t, opts)
	ctx := context.Background()
	if _, err := d.controller().CreateVolume(ctx, createReq("vol-a", 1<<20, mountCap())); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(f.base, "pool.moved")
	if err := os.Rename(f.pool, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.outside, f.pool); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, f.base)
	calls := map[string]func() error{
		"CreateVolume": func() error {
			_, err := d.controller().CreateVolume(ctx, createReq("vol-b", 1<<20, mountCap()))
			return err
		},
		"DeleteVolume": func() error {
			_, err := d.controller().DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-a"})
			return err
		},
		"ListVolumes": func() error { _, err := d.controller().ListVolumes(ctx, &csi.ListVolumesRequest{}); return err },
		"GetCapacity": func() error { _, err := d.controller().GetCapacity(ctx, &csi.GetCapacityRequest{}); return err },
		"NodePublishVolume": func() error {
			_, err := d.node().NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-a", TargetPath: filepath.Join(f.base, "target"), VolumeCapability: mountCap()})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no longer the directory opened at start") {
			t.Errorf("%s after the pool was replaced = %v, want FailedPrecondition", name, err)
		}
	}
	probe, err := d.identity().Probe(ctx, &csi.ProbeRequest{})
	if err != nil || probe.GetReady().GetValue() {
		t.Errorf("Probe after the pool was replaced = %v, %v; want not ready", probe, err)
	}
	if diff := before.diff(snapshot(t, f.base)); diff != "" {
		t.Fatalf("after calls on a replaced pool:\n%s", diff)
	}
}

// FuzzVolumeID creates and deletes a volume named by arbitrary bytes,
// calling the controller in-process (no gRPC UTF-8 check), and asserts: an
// ID ValidateVolumeID refuses is InvalidArgument and touches nothing; an
// accepted one creates exactly <pool>/<id> (or AlreadyExists for a planted
// entry) and DeleteVolume removes it again; nothing outside the pool ever
// changes. `go test` runs the seeds; `go test -fuzz FuzzVolumeID` explores.
func FuzzVolumeID(f *testing.F) {
	for _, tc := range hostileIDs {
		f.Add(tc.id)
	}
	fx := newHostileFixture(f)
	cs := fuzzController(f, fx.pool)
	ctx := context.Background()
	before := fx.outsideSnapshot(f)
	poolBefore := snapshot(f, fx.pool)
	planted := map[string]bool{}
	for _, l := range plantedLinks {
		planted[l] = true
	}
	f.Fuzz(func(t *testing.T, id string) {
		verr := ValidateVolumeID(id)
		if verr == nil && (strings.ContainsAny(id, "/\x00") || id == "." || id == ".." || len(id) > MaxVolumeIDLength) {
			t.Fatalf("ValidateVolumeID(%q) accepted a path-like ID", id)
		}
		_, err := cs.CreateVolume(ctx, createReq(id, 4096, mountCap()))
		switch {
		case verr != nil:
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("CreateVolume(%q) = %v, want InvalidArgument (%v)", id, err, verr)
			}
		case planted[id]:
			if status.Code(err) != codes.AlreadyExists {
				t.Fatalf("CreateVolume(%q) = %v, want AlreadyExists for a planted entry", id, err)
			}
		default:
			if err != nil {
				t.Fatalf("CreateVolume(%q) = %v", id, err)
			}
			if st, err := os.Lstat(filepath.Join(fx.pool, id, metaFile)); err != nil || !st.Mode().IsRegular() {
				t.Fatalf("CreateVolume(%q): no %s in <pool>/%s: %v", id, metaFile, id, err)
			}
		}
		_, err = cs.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
		if want := map[bool]codes.Code{true: codes.OK, false: codes.InvalidArgument}[verr == nil]; status.Code(err) != want {
			t.Fatalf("DeleteVolume(%q) = %v, want %v", id, err, want)
		}
		if diff := before.diff(fx.outsideSnapshot(t)); diff != "" {
			t.Fatalf("after CreateVolume/DeleteVolume(%q), outside the pool:\n%s", id, diff)
		}
		if diff := poolBefore.diff(snapshot(t, fx.pool)); diff != "" {
			t.Fatalf("after CreateVolume/DeleteVolume(%q), the pool:\n%s", id, diff)
		}
	})
}

// fuzzController gives the controller of a driver on pool, closed when
// the fuzz target ends: the fuzz targets call it in-process.
func fuzzController(f *testing.F, pool string) *controllerServer {
	opts := testOptions(f.TempDir())
	opts.Pools[0].Path = pool
	d, err := New(opts)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { d.Close() })
	return &controllerServer{d: d}
}
