package hostpath

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// TestPublishData checks that a published volume is the pool's data: bytes
// written through a filesystem target land in <pool>/<id>/data, bytes
// written to a block target's device land in <pool>/<id>/disk.img, a
// read-only publication refuses writes (EROFS), and stats are reported.
// NodePublishVolume latencies are logged.
func TestPublishData(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	d := startDriver(t, testOptions(dir))
	ctx := context.Background()
	targets := t.TempDir()
	pub := func(id, target string, c *csi.VolumeCapability, ro bool) {
		t.Helper()
		start := time.Now()
		if _, err := d.node().NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: c, Readonly: ro}); err != nil {
			t.Fatal(err)
		}
		t.Logf("NodePublishVolume %s (readonly=%v): %s", id, ro, time.Since(start))
	}
	unpub := func(id, target string) {
		t.Helper()
		if _, err := d.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := d.controller().CreateVolume(ctx, createReq("fs", 1<<20, mountCap())); err != nil {
		t.Fatal(err)
	}
	rw, ro := filepath.Join(targets, "fs-rw"), filepath.Join(targets, "fs-ro")
	pub("fs", rw, mountCap(), false)
	pub("fs", ro, mountCap(), true)
	if err := os.WriteFile(filepath.Join(rw, "hello"), []byte("hostpath"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "pool", "fs", dataDir, "hello")); err != nil || string(b) != "hostpath" {
		t.Fatalf("pool data after a write through the target: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(ro, "hello")); err != nil || string(b) != "hostpath" {
		t.Fatalf("read through the read-only target: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(ro, "nope"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write through the read-only target: %v, want EROFS", err)
	}
	stats, err := d.node().NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "fs", VolumePath: rw})
	if err != nil || len(stats.GetUsage()) != 2 || stats.GetUsage()[0].GetTotal() <= 0 {
		t.Fatalf("NodeGetVolumeStats(fs) = %v, %v; want bytes and inodes", stats, err)
	}
	unpub("fs", rw)
	unpub("fs", ro)

	if _, err := d.controller().CreateVolume(ctx, createReq("blk", 1<<20, blockCap())); err != nil {
		t.Fatal(err)
	}
	bt := filepath.Join(targets, "blk")
	pub("blk", bt, blockCap(), false)
	f, err := os.OpenFile(bt, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeDevice == 0 {
		t.Fatalf("block target %s is %v, %v; want a device", bt, st.Mode(), err)
	}
	if _, err := f.WriteAt([]byte("block-data"), 512*7); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	size, _ := f.Seek(0, 2)
	f.Close()
	if size != 1<<20 {
		t.Errorf("block device size %d, want %d", size, 1<<20)
	}
	img, err := os.ReadFile(filepath.Join(dir, "pool", "blk", diskFile))
	if err != nil || string(img[512*7:512*7+10]) != "block-data" {
		t.Fatalf("disk.img after a write through the device: %v", err)
	}
	stats, err = d.node().NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "blk", VolumePath: bt})
	if err != nil || stats.GetUsage()[0].GetTotal() != 1<<20 {
		t.Fatalf("NodeGetVolumeStats(blk) = %v, %v", stats, err)
	}
	if loops := loopsUnder(t, dir); len(loops) != 1 {
		t.Errorf("loop devices of the pool while published: %v, want one", loops)
	}
	unpub("blk", bt)
	if loops := loopsUnder(t, dir); len(loops) != 0 {
		t.Errorf("loop devices of the pool after unpublish: %v, want none", loops)
	}
	for _, id := range []string{"fs", "blk"} {
		if _, err := d.controller().DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatal(err)
		}
	}
}
