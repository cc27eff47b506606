package hostpath

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestMountedPool: a Mounted pool whose path is not a mount point yet
// takes no volume (CreateVolume in it is Unavailable, so the provisioner
// retries) and gets nothing written under its path, while the other pool
// serves, lists and probes ready; once a directory is bind-mounted there
// (as a storage pool worker does) the pool serves, its volume in the
// mounted directory.
func TestMountedPool(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	opts := testOptions(dir)
	fast := filepath.Join(dir, "fast", "csi")
	if err := os.MkdirAll(fast, 0o750); err != nil {
		t.Fatal(err)
	}
	opts.Pools = append(opts.Pools, Pool{Name: "fast", Path: fast, Mounted: true})
	d := startDriver(t, opts)
	ctx := context.Background()
	inFast := func(name string) *csi.CreateVolumeRequest {
		r := createReq(name, 1<<20, mountCap())
		r.Parameters = map[string]string{ParameterStoragePool: "fast"}
		return r
	}

	if _, err := d.controller().CreateVolume(ctx, inFast("vol-early")); status.Code(err) != codes.Unavailable {
		t.Errorf("CreateVolume in the unmounted pool = %v, want Unavailable", err)
	}
	if entries, _ := os.ReadDir(fast); len(entries) != 0 {
		t.Errorf("the unmounted pool's path holds %d entries, want none written under the mount point", len(entries))
	}
	if _, err := d.controller().CreateVolume(ctx, createReq("vol-local", 1<<20, mountCap())); err != nil {
		t.Fatalf("CreateVolume in the other pool while one waits for its mount: %v", err)
	}
	if _, err := d.controller().ListVolumes(ctx, &csi.ListVolumesRequest{}); err != nil {
		t.Errorf("ListVolumes while a pool waits for its mount: %v", err)
	}
	if p, err := d.identity().Probe(ctx, &csi.ProbeRequest{}); err != nil || !p.GetReady().GetValue() {
		t.Errorf("Probe while a pool waits for its mount = %v, %v; want ready", p, err)
	}

	backing := filepath.Join(dir, "pvc")
	if err := os.MkdirAll(backing, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(backing, fast, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(fast, unix.MNT_DETACH) })
	if _, err := d.controller().CreateVolume(ctx, inFast("vol-fast")); err != nil {
		t.Fatalf("CreateVolume once the pool is mounted: %v", err)
	}
	if _, err := os.Stat(filepath.Join(backing, "vol-fast")); err != nil {
		t.Errorf("the volume is not in the mounted directory: %v", err)
	}
}
