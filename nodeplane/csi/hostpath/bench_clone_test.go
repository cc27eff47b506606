package hostpath

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// Shape of the disk BenchmarkClone copies: a 1 GiB block volume with
// benchData bytes of data in benchExtent pieces spread evenly over it.
const (
	benchDisk   = 1 << 30
	benchData   = 256 << 20
	benchExtent = 4 << 20
)

// writeBenchDisk fills the disk file at path with benchData bytes of
// pseudo-random data (no zero runs to skip), one benchExtent every
// benchDisk/(benchData/benchExtent) bytes, and fsyncs it.
func writeBenchDisk(b *testing.B, path string) {
	b.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r := rand.New(rand.NewChaCha8([32]byte{1}))
	buf := make([]byte, benchExtent)
	n := benchData / benchExtent
	for i := range n {
		for j := 0; j < len(buf); j += 8 {
			v := r.Uint64()
			for k := range 8 {
				buf[j+k] = byte(v >> (8 * k))
			}
		}
		if _, err := f.WriteAt(buf, int64(i)*(benchDisk/int64(n))); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClone measures, in one run on one pool, a CSI clone
// (CreateVolume from a volume) of a 1 GiB block volume holding 256 MiB of
// data, `cp --sparse=always` of the same disk file into the same pool, and
// CreateSnapshot of the volume. Metrics: clone-ms, cp-sparse-ms, the ratio
// cp/clone (above 1: the clone is faster) and snapshot-ms, each a mean per
// iteration; one op is all three plus their deletion (not timed). It runs
// on the pool filesystem of the test's temporary directory ("tmpdir":
// sparse copy unless that filesystem has reflink) and, as root with
// mkfs.xfs installed, on a loop-mounted XFS with reflink ("xfs-reflink").
func BenchmarkClone(b *testing.B) {
	pools := []struct {
		name string
		dir  func(b *testing.B) string
	}{
		{"tmpdir", func(b *testing.B) string { return b.TempDir() }},
		{"xfs-reflink", func(b *testing.B) string { return xfsDir(b, 4<<30) }},
	}
	cp, err := exec.LookPath("cp")
	if err != nil {
		b.Skip("no cp in PATH")
	}
	for _, pc := range pools {
		b.Run(pc.name, func(b *testing.B) {
			opts := testOptions(b.TempDir())
			opts.Pools[0].Path = filepath.Join(pc.dir(b), "pool")
			d := startDriver(b, opts)
			ctx := context.Background()
			c := d.controller()
			if _, err := c.CreateVolume(ctx, createReq("golden", benchDisk, blockCap())); err != nil {
				b.Fatal(err)
			}
			disk := filepath.Join(opts.Pools[0].Path, "golden", diskFile)
			writeBenchDisk(b, disk)
			cpDst := filepath.Join(opts.Pools[0].Path, "cp-copy.img")
			var clone, cpTime, snap time.Duration
			n := 0
			for b.Loop() {
				n++
				start := time.Now()
				if _, err := c.CreateVolume(ctx, fromVolume(createReq("clone", benchDisk, blockCap()), "golden")); err != nil {
					b.Fatal(err)
				}
				clone += time.Since(start)
				if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "clone"}); err != nil {
					b.Fatal(err)
				}

				start = time.Now()
				if out, err := exec.Command(cp, "--sparse=always", disk, cpDst).CombinedOutput(); err != nil {
					b.Fatalf("cp: %v\n%s", err, out)
				}
				cpTime += time.Since(start)
				if err := os.Remove(cpDst); err != nil {
					b.Fatal(err)
				}

				start = time.Now()
				if _, err := c.CreateSnapshot(ctx, snapReq("snap", "golden")); err != nil {
					b.Fatal(err)
				}
				snap += time.Since(start)
				if _, err := c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "snap"}); err != nil {
					b.Fatal(err)
				}
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(n) }
			b.ReportMetric(ms(clone), "clone-ms")
			b.ReportMetric(ms(cpTime), "cp-sparse-ms")
			b.ReportMetric(float64(cpTime)/float64(clone), "cp/clone")
			b.ReportMetric(ms(snap), "snapshot-ms")
			if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "golden"}); err != nil {
				b.Fatal(err)
			}
		})
	}
}
