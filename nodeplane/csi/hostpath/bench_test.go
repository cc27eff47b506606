package hostpath

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// BenchmarkNodePublish publishes and unpublishes one volume over the
// driver's gRPC socket, filesystem (bind mount of <pool>/<id>/data) and
// block (loop device on disk.img, its node bind-mounted on a file). One
// op is a NodePublishVolume plus a NodeUnpublishVolume; the metrics
// publish-ms and unpublish-ms split it. Needs root.
func BenchmarkNodePublish(b *testing.B) {
	requireRoot(b)
	dir := b.TempDir()
	d := startDriver(b, testOptions(dir))
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cap  *csi.VolumeCapability
	}{{"filesystem", mountCap()}, {"block", blockCap()}} {
		b.Run(tc.name, func(b *testing.B) {
			id := "bench-" + tc.name
			if _, err := d.controller().CreateVolume(ctx, createReq(id, 16<<20, tc.cap)); err != nil {
				b.Fatal(err)
			}
			targets := b.TempDir()
			var pub, unpub time.Duration
			i := 0
			for b.Loop() {
				target := filepath.Join(targets, fmt.Sprint(i))
				i++
				start := time.Now()
				if _, err := d.node().NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: tc.cap}); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if _, err := d.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
					b.Fatal(err)
				}
				pub += mid.Sub(start)
				unpub += time.Since(mid)
			}
			b.ReportMetric(float64(pub.Microseconds())/1e3/float64(i), "publish-ms")
			b.ReportMetric(float64(unpub.Microseconds())/1e3/float64(i), "unpublish-ms")
			if _, err := d.controller().DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
				b.Fatal(err)
			}
		})
	}
}
