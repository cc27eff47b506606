package hostpath

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRestart creates volumes (and, as root, publishes a block volume),
// stops the driver and starts a new one on the same pool: ListVolumes (in
// pages of 2) sees the same volumes, CreateVolume of the same name and size
// returns the same volume, a different size is AlreadyExists, and the new
// driver unpublishes what the old one published (detaching its loop device).
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir)
	ctx := context.Background()
	vols := map[string]*csi.CreateVolumeRequest{
		"vol-a": createReq("vol-a", 1<<20, mountCap()),
		"vol-b": createReq("vol-b", 2<<20, blockCap()),
		"vol-c": createReq("vol-c", 3<<20+1, mountCap()),
	}
	want := map[string]int64{"vol-a": 1 << 20, "vol-b": 2 << 20, "vol-c": 3<<20 + 512}
	d1 := startDriver(t, opts)
	for name, req := range vols {
		resp, err := d1.controller().CreateVolume(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetVolume().GetCapacityBytes() != want[name] {
			t.Fatalf("CreateVolume(%s) capacity %d, want %d", name, resp.GetVolume().GetCapacityBytes(), want[name])
		}
	}
	target := filepath.Join(t.TempDir(), "block-target")
	root := os.Geteuid() == 0
	if root {
		defer func() {
			if loops := loopsUnder(t, dir); len(loops) != 0 {
				t.Errorf("loop devices left: %v", loops)
			}
		}()
		if _, err := d1.node().NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-b", TargetPath: target, VolumeCapability: blockCap()}); err != nil {
			t.Fatal(err)
		}
	}
	d1.stop()

	d2 := startDriver(t, opts)
	got := map[string]int64{}
	token := ""
	pages := 0
	for {
		resp, err := d2.controller().ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range resp.GetEntries() {
			got[e.GetVolume().GetVolumeId()] = e.GetVolume().GetCapacityBytes()
			if seg := e.GetVolume().GetAccessibleTopology(); len(seg) != 1 || seg[0].GetSegments()[TopologyKey] != opts.NodeID {
				t.Errorf("volume %s topology %v, want %s=%s", e.GetVolume().GetVolumeId(), seg, TopologyKey, opts.NodeID)
			}
		}
		if token = resp.GetNextToken(); token == "" {
			break
		}
	}
	if pages != 2 || len(got) != len(want) {
		t.Fatalf("ListVolumes after restart: %v in %d pages, want %v in 2", got, pages, want)
	}
	for name, size := range want {
		if got[name] != size {
			t.Errorf("ListVolumes after restart: %s capacity %d, want %d", name, got[name], size)
		}
		resp, err := d2.controller().CreateVolume(ctx, vols[name])
		if err != nil || resp.GetVolume().GetVolumeId() != name || resp.GetVolume().GetCapacityBytes() != size {
			t.Errorf("CreateVolume(%s) again after restart = %v, %v; want the same volume", name, resp, err)
		}
	}
	if _, err := d2.controller().CreateVolume(ctx, createReq("vol-a", 8<<20, mountCap())); status.Code(err) != codes.AlreadyExists {
		t.Errorf("CreateVolume(vol-a, other size) after restart = %v, want AlreadyExists", err)
	}
	if _, err := d2.controller().CreateVolume(ctx, createReq("vol-a", 1<<20, blockCap())); status.Code(err) != codes.AlreadyExists {
		t.Errorf("CreateVolume(vol-a, block) after restart = %v, want AlreadyExists", err)
	}
	if root {
		if _, err := d2.controller().DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-b"}); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("DeleteVolume of a volume published before the restart = %v, want FailedPrecondition", err)
		}
		if _, err := d2.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-b", TargetPath: target}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(target); !os.IsNotExist(err) {
			t.Errorf("target %s after unpublish: %v, want removed", target, err)
		}
		if loops := loopsUnder(t, dir); len(loops) != 0 {
			t.Errorf("loop devices of the pool after unpublish by the new driver: %v, want none", loops)
		}
	}
	for name := range want {
		if _, err := d2.controller().DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: name}); err != nil {
			t.Fatal(err)
		}
	}
}
