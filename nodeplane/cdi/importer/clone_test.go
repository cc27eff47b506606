package importer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestClone copies a sparse raw image: the bytes are the source's grown
// to the volume size, the holes stay holes (no more blocks allocated than
// the source's data), and a source larger than the volume is TooBig.
func TestClone(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "disk.img")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	// 8 MiB: data at 0, 3 MiB (with a zero 4 KiB block inside) and the last 4 KiB, holes between.
	want := make([]byte, 8*mib)
	for _, off := range []int{0, 3 * mib, 8*mib - 4096} {
		for i := range 4096 * 3 {
			if off+i < len(want) {
				want[off+i] = byte(i%251 + 1)
			}
		}
	}
	copy(want[3*mib+4096:3*mib+8192], make([]byte, 4096))
	for _, off := range []int{0, 3 * mib, 8*mib - 4096} {
		end := min(off+4096*3, len(want))
		if _, err := f.WriteAt(want[off:end], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(8 * mib); err != nil {
		t.Fatal(err)
	}
	f.Close()

	dst := filepath.Join(t.TempDir(), "disk.img")
	var reports []Progress
	opts := DefaultOptions()
	opts.Progress = func(p Progress) { reports = append(reports, p) }
	res, err := Clone(context.Background(), src, Target{Path: dst, SizeBytes: 16 * mib}, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, padded(want, 16*mib)) {
		t.Errorf("the clone differs from the source grown to 16 MiB")
	}
	if res.SizeBytes != 16*mib || res.VirtualSize != 8*mib || res.DownloadedBytes >= 8*mib {
		t.Errorf("result %+v: want 16 MiB placed, 8 MiB virtual, only the data extents read", res)
	}
	if a, s := blocks(t, dst), blocks(t, src); a > s {
		t.Errorf("clone allocates %d bytes, the source %d: holes were filled", a, s)
	}
	if len(reports) == 0 || reports[len(reports)-1].Percent != 100 {
		t.Errorf("progress %v, want a last report of 100%%", reports)
	}
	if _, err := Clone(context.Background(), src, Target{Path: dst, SizeBytes: 4 * mib}, opts); ReasonOf(err) != ReasonTooBig {
		t.Errorf("clone into a smaller volume: %v, want TooBig", err)
	}
	if got2, _ := os.ReadFile(dst); !bytes.Equal(got2, got) {
		t.Errorf("a refused clone changed %s", dst)
	}
	if _, err := Clone(context.Background(), filepath.Join(dir, "missing.img"), Target{Path: dst, SizeBytes: 16 * mib}, opts); ReasonOf(err) != ReasonNotFound {
		t.Errorf("missing source: %v, want NotFound", err)
	}
}

func blocks(t *testing.T, p string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}
