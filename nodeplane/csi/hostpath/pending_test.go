package hostpath

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestCopyWithoutLock holds a clone's data copy open (copyHook) and checks
// that meanwhile the driver answers other calls (ListVolumes, a new
// volume, a snapshot of the same source, NodeGetInfo), refuses to delete or
// expand the source and the clone, or to create the clone again, with
// Aborted, does not list the clone, and that the clone completes with the
// source's content once the copy goes on.
func TestCopyWithoutLock(t *testing.T) {
	dir := t.TempDir()
	d := startDriver(t, testOptions(dir))
	ctx := context.Background()
	c := d.controller()
	if _, err := c.CreateVolume(ctx, createReq("src", 8<<20, blockCap())); err != nil {
		t.Fatal(err)
	}
	writeVersion(t, dataPath(dir, "src", blockCap(), false), true, "src")
	want := content(t, dataPath(dir, "src", blockCap(), false))

	started, release := make(chan struct{}), make(chan struct{})
	var copies atomic.Int32
	d.copyHook = func() { // only the first copy (the clone) waits
		if copies.Add(1) == 1 {
			close(started)
			<-release
		}
	}
	cloneReq := fromVolume(createReq("clone", 8<<20, blockCap()), "src")
	cloneErr := make(chan error, 1)
	go func() { _, err := c.CreateVolume(ctx, cloneReq); cloneErr <- err }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the clone's copy did not start")
	}
	// A call blocked behind the copy would hit this deadline.
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"ListVolumes (clone not listed)", func() error {
			resp, err := c.ListVolumes(lctx, &csi.ListVolumesRequest{})
			if err == nil && len(resp.GetEntries()) != 1 {
				t.Errorf("ListVolumes during the clone: %v, want src only", resp.GetEntries())
			}
			return err
		}, codes.OK},
		{"CreateVolume of another volume", func() error {
			_, err := c.CreateVolume(lctx, createReq("other", 1<<20, mountCap()))
			return err
		}, codes.OK},
		{"CreateSnapshot of the source", func() error { _, err := c.CreateSnapshot(lctx, snapReq("snap", "src")); return err }, codes.OK},
		{"NodeGetInfo", func() error { _, err := d.node().NodeGetInfo(lctx, &csi.NodeGetInfoRequest{}); return err }, codes.OK},
		{"CreateVolume of the clone again", func() error { _, err := c.CreateVolume(lctx, cloneReq); return err }, codes.Aborted},
		{"DeleteVolume of the clone", func() error {
			_, err := c.DeleteVolume(lctx, &csi.DeleteVolumeRequest{VolumeId: "clone"})
			return err
		}, codes.Aborted},
		{"DeleteVolume of the source", func() error {
			_, err := c.DeleteVolume(lctx, &csi.DeleteVolumeRequest{VolumeId: "src"})
			return err
		}, codes.Aborted},
		{"ControllerExpandVolume of the source", func() error {
			_, err := c.ControllerExpandVolume(lctx, &csi.ControllerExpandVolumeRequest{VolumeId: "src", CapacityRange: &csi.CapacityRange{RequiredBytes: 16 << 20}})
			return err
		}, codes.Aborted},
	} {
		callCtx, cancel := context.WithTimeout(lctx, 5*time.Second)
		_ = callCtx
		if err := tc.call(); status.Code(err) != tc.want {
			t.Errorf("%s during the clone's copy: %v, want %v", tc.name, err, tc.want)
		}
		cancel()
	}
	close(release)
	if err := <-cloneErr; err != nil {
		t.Fatalf("clone: %v", err)
	}
	if got := content(t, dataPath(dir, "clone", blockCap(), false)); got != want {
		t.Errorf("clone after the held copy:\n%s\nwant:\n%s", got, want)
	}
	for _, id := range []string{"clone", "src", "other"} {
		if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Errorf("DeleteVolume(%s) after the copy: %v", id, err)
		}
	}
}
