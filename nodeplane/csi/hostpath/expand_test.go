package hostpath

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/converge-dev/converge/nodeplane/csi/loopdev"
)

// TestControllerExpandVolume grows filesystem and block volumes and checks
// the answers, the capacity ListVolumes reports, the disk file's size, and
// the refusals (shrinking, missing volume, no range).
func TestControllerExpandVolume(t *testing.T) {
	dir := t.TempDir()
	d := startDriver(t, testOptions(dir))
	ctx := context.Background()
	c := d.controller()
	for _, req := range []*csi.CreateVolumeRequest{createReq("fs", 1<<20, mountCap()), createReq("blk", 1<<20, blockCap())} {
		if _, err := c.CreateVolume(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	expand := func(id string, req, lim int64) (*csi.ControllerExpandVolumeResponse, error) {
		return c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: req, LimitBytes: lim}})
	}
	for _, tc := range []struct {
		name       string
		id         string
		req, lim   int64
		want       codes.Code
		wantSize   int64 // capacity answered and then listed
		wantNodeEx bool
	}{
		{"grow filesystem", "fs", 3 << 20, 0, codes.OK, 3 << 20, false},
		{"grow block", "blk", 3 << 20, 0, codes.OK, 3 << 20, true},
		{"grow block, unaligned: rounded up to 512", "blk", 4<<20 + 1, 0, codes.OK, 4<<20 + 512, true},
		{"already as large", "blk", 2 << 20, 0, codes.OK, 4<<20 + 512, true},
		{"shrink below the capacity", "fs", 1 << 20, 2 << 20, codes.OutOfRange, 3 << 20, false},
		{"over the pool's free space", "fs", 1 << 60, 0, codes.OutOfRange, 3 << 20, false},
		{"missing volume", "missing", 1 << 20, 0, codes.NotFound, 0, false},
		{"malformed ID", "../fs", 1 << 20, 0, codes.InvalidArgument, 0, false},
		{"no capacity", "fs", 0, 0, codes.InvalidArgument, 3 << 20, false},
	} {
		resp, err := expand(tc.id, tc.req, tc.lim)
		if status.Code(err) != tc.want {
			t.Errorf("%s: ControllerExpandVolume(%s, %d) = %v, want %v", tc.name, tc.id, tc.req, err, tc.want)
			continue
		}
		if err == nil && (resp.GetCapacityBytes() != tc.wantSize || resp.GetNodeExpansionRequired() != tc.wantNodeEx) {
			t.Errorf("%s: answer %v, want %d bytes, node expansion %v", tc.name, resp, tc.wantSize, tc.wantNodeEx)
		}
		if tc.wantSize == 0 {
			continue
		}
		list, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list.GetEntries() {
			if e.GetVolume().GetVolumeId() == tc.id && e.GetVolume().GetCapacityBytes() != tc.wantSize {
				t.Errorf("%s: ListVolumes has %s at %d bytes, want %d", tc.name, tc.id, e.GetVolume().GetCapacityBytes(), tc.wantSize)
			}
		}
	}
	if st, err := os.Stat(dataPath(dir, "blk", blockCap(), false)); err != nil || st.Size() != 4<<20+512 {
		t.Errorf("block volume's disk file after expansion: %v, %v; want %d bytes", st.Size(), err, 4<<20+512)
	}
}

// TestExpandPublishedBlock expands a published block volume (online): the
// device bind-mounted at the target grows at ControllerExpandVolume, the
// data written before is still there, NodeExpandVolume confirms the size,
// and asking the node for more than the controller gave is refused.
func TestExpandPublishedBlock(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	d := startDriver(t, testOptions(dir))
	ctx := context.Background()
	if _, err := d.controller().CreateVolume(ctx, createReq("blk", 1<<20, blockCap())); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "dev")
	if _, err := d.node().NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "blk", TargetPath: target, VolumeCapability: blockCap()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := d.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "blk", TargetPath: target}); err != nil {
			t.Error(err)
		}
		if loops := loopsUnder(t, dir); len(loops) > 0 {
			t.Errorf("loop devices left: %v", loops)
		}
	})
	dev, err := os.OpenFile(target, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if _, err := dev.WriteAt([]byte("before expansion"), 1000); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		t.Helper()
		n, err := loopdev.Size(dev)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := size(); n != 1<<20 {
		t.Fatalf("published device: %d bytes, want %d", n, 1<<20)
	}
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
		size int64
	}{
		{"node expansion before the controller's", func() error {
			_, err := d.node().NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "blk", VolumePath: target, CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 20}})
			return err
		}, codes.FailedPrecondition, 1 << 20},
		{"controller expansion while published", func() error {
			_, err := d.controller().ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "blk", CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 20}})
			return err
		}, codes.OK, 8 << 20},
		{"node expansion", func() error {
			resp, err := d.node().NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "blk", VolumePath: target, CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 20}, VolumeCapability: blockCap()})
			if err == nil && resp.GetCapacityBytes() != 8<<20 {
				t.Errorf("NodeExpandVolume answered %d bytes, want %d", resp.GetCapacityBytes(), 8<<20)
			}
			return err
		}, codes.OK, 8 << 20},
		{"node expansion with the wrong access type", func() error {
			_, err := d.node().NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "blk", VolumePath: target, VolumeCapability: mountCap()})
			return err
		}, codes.InvalidArgument, 8 << 20},
		{"node expansion without a path", func() error {
			_, err := d.node().NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "blk"})
			return err
		}, codes.InvalidArgument, 8 << 20},
		{"node expansion of a missing volume", func() error {
			_, err := d.node().NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "missing", VolumePath: target})
			return err
		}, codes.NotFound, 8 << 20},
	} {
		if err := tc.call(); status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if n := size(); n != tc.size {
			t.Errorf("%s: published device has %d bytes, want %d", tc.name, n, tc.size)
		}
	}
	buf := make([]byte, len("before expansion"))
	if _, err := dev.ReadAt(buf, 1000); err != nil || string(buf) != "before expansion" {
		t.Errorf("data written before the expansion reads %q, %v", buf, err)
	}
	if _, err := dev.WriteAt([]byte("in the new space"), 7<<20); err != nil {
		t.Errorf("writing in the grown part of the device: %v", err)
	}
}
