package importer

import (
	"context"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkImport imports a 128 MiB image (1 MiB stripes, every other one
// random, the rest zeros) over loopback HTTP, as raw and as qcow2, and in
// the same iteration times plain `qemu-img convert -O raw -S 4k` of the same
// file from local disk. Metrics: MB/s (Import, virtual bytes / s),
// qemu-img-MB/s, and ratio = Import MB/s / qemu-img MB/s.
func BenchmarkImport(b *testing.B) {
	requireTool(b, "qemu-img")
	const size = 128 * mib
	dir := b.TempDir()
	raw := make([]byte, size)
	rng := rand.New(rand.NewSource(1))
	for off := 0; off < size; off += 2 * mib {
		rng.Read(raw[off : off+mib])
	}
	rawPath, qcowPath := filepath.Join(dir, "src.raw"), filepath.Join(dir, "src.qcow2")
	if err := os.WriteFile(rawPath, raw, 0o644); err != nil {
		b.Fatal(err)
	}
	run(b, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", rawPath, qcowPath)
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	b.Cleanup(srv.Close)

	for _, tc := range []struct{ name, file, format string }{
		{"raw", "src.raw", "raw"},
		{"qcow2", "src.qcow2", "qcow2"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			out := b.TempDir()
			target := filepath.Join(out, "disk.img")
			b.SetBytes(size)
			var imp, conv time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := Import(context.Background(), Source{URL: srv.URL + "/" + tc.file}, Target{Path: target, SizeBytes: size}, DefaultOptions()); err != nil {
					b.Fatal(err)
				}
				imp += time.Since(start)
				b.StopTimer()
				os.Remove(target)

				start = time.Now()
				cmd := exec.Command("qemu-img", "convert", "-t", "writeback", "-f", tc.format, "-O", "raw", "-S", "4k", filepath.Join(dir, tc.file), target)
				if o, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("qemu-img convert: %v\n%s", err, o)
				}
				conv += time.Since(start)
				os.Remove(target)
				b.StartTimer()
			}
			mbps := func(d time.Duration) float64 { return float64(b.N) * size / 1e6 / d.Seconds() }
			b.ReportMetric(mbps(imp), "import-MB/s")
			b.ReportMetric(mbps(conv), "qemu-img-MB/s")
			b.ReportMetric(mbps(imp)/mbps(conv), "ratio")
		})
	}
}
