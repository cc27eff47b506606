package hostpath

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestRestartSnapshots takes snapshots, clones and expands volumes, stops
// the driver and starts a new one on the same pool: the snapshots are
// listed and got with the same fields (creation time included), a repeated
// CreateSnapshot returns the same snapshot, a volume is restored from a
// snapshot taken before the restart with its content, the clone keeps its
// content source (a repeated clone request is the same volume, another
// source AlreadyExists) and the expanded capacity stays.
func TestRestartSnapshots(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir)
	ctx := context.Background()
	d1 := startDriver(t, opts)
	for _, tc := range []struct {
		vol  string
		cap  *csi.VolumeCapability
		snap string
	}{{"fs", mountCap(), "fs-snap"}, {"blk", blockCap(), "blk-snap"}} {
		if _, err := d1.controller().CreateVolume(ctx, createReq(tc.vol, 8<<20, tc.cap)); err != nil {
			t.Fatal(err)
		}
		writeVersion(t, dataPath(dir, tc.vol, tc.cap, false), tc.cap.GetBlock() != nil, "before")
		if _, err := d1.controller().CreateSnapshot(ctx, snapReq(tc.snap, tc.vol)); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{
		"fs":  content(t, dataPath(dir, "fs", mountCap(), false)),
		"blk": content(t, dataPath(dir, "blk", blockCap(), false)),
	}
	if _, err := d1.controller().CreateVolume(ctx, fromVolume(createReq("fs-clone", 8<<20, mountCap()), "fs")); err != nil {
		t.Fatal(err)
	}
	if _, err := d1.controller().ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "blk", CapacityRange: &csi.CapacityRange{RequiredBytes: 16 << 20}}); err != nil {
		t.Fatal(err)
	}
	before, err := d1.controller().ListSnapshots(ctx, &csi.ListSnapshotsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	d1.stop()

	d2 := startDriver(t, opts)
	c := d2.controller()
	after, err := c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.GetEntries()) != 2 || !proto.Equal(before, after) {
		t.Errorf("ListSnapshots after restart:\n%v\nwant the same as before:\n%v", after, before)
	}
	for _, e := range before.GetEntries() {
		s := e.GetSnapshot()
		got, err := c.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: s.GetSnapshotId()})
		if err != nil || !proto.Equal(got.GetSnapshot(), s) {
			t.Errorf("GetSnapshot(%s) after restart = %v, %v; want %v", s.GetSnapshotId(), got, err, s)
		}
		again, err := c.CreateSnapshot(ctx, snapReq(s.GetSnapshotId(), s.GetSourceVolumeId()))
		if err != nil || !proto.Equal(again.GetSnapshot(), s) {
			t.Errorf("CreateSnapshot(%s) again after restart = %v, %v; want %v", s.GetSnapshotId(), again, err, s)
		}
	}
	for _, tc := range []struct {
		vol, snap string
		cap       *csi.VolumeCapability
	}{{"fs", "fs-snap", mountCap()}, {"blk", "blk-snap", blockCap()}} {
		if _, err := c.CreateVolume(ctx, fromSnapshot(createReq(tc.vol+"-restored", 8<<20, tc.cap), tc.snap)); err != nil {
			t.Fatal(err)
		}
		if got := content(t, dataPath(dir, tc.vol+"-restored", tc.cap, false)); got != want[tc.vol] {
			t.Errorf("%s restored after restart:\n%s\nwant:\n%s", tc.vol, got, want[tc.vol])
		}
	}
	if resp, err := c.CreateVolume(ctx, fromVolume(createReq("fs-clone", 8<<20, mountCap()), "fs")); err != nil || resp.GetVolume().GetContentSource().GetVolume().GetVolumeId() != "fs" {
		t.Errorf("repeated clone after restart = %v, %v; want the clone of fs", resp, err)
	}
	if _, err := c.CreateVolume(ctx, fromVolume(createReq("fs-clone", 8<<20, mountCap()), "fs-restored")); status.Code(err) != codes.AlreadyExists {
		t.Errorf("clone name with another source after restart = %v, want AlreadyExists", err)
	}
	list, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.GetEntries() {
		if v := e.GetVolume(); v.GetVolumeId() == "blk" && v.GetCapacityBytes() != 16<<20 {
			t.Errorf("expanded volume after restart: %d bytes, want %d", v.GetCapacityBytes(), 16<<20)
		}
	}
}
