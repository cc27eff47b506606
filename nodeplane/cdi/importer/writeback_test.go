package importer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// countWritebacks makes startWriteback count its calls (and still start
// the writeback) for the rest of the test.
func countWritebacks(t *testing.T) *atomic.Int64 {
	var n atomic.Int64
	prev := startWriteback
	startWriteback = func(f *os.File) error {
		n.Add(1)
		return prev(f)
	}
	t.Cleanup(func() { startWriteback = prev })
	return &n
}

// TestSpoolWriteback: a spool whose body is not qcow2 starts writeback
// as it grows (every flushStep bytes), a qcow2 one (removed after the
// conversion) never does, and a restarted attempt follows its own body.
func TestSpoolWriteback(t *testing.T) {
	for _, tc := range []struct {
		name   string
		qcow2  []bool // body of each attempt
		wantAt bool   // writebacks expected
	}{
		{name: "raw body", qcow2: []bool{false}, wantAt: true},
		{name: "qcow2 body", qcow2: []bool{true}, wantAt: false},
		{name: "raw attempt then qcow2 attempt", qcow2: []bool{false, true}, wantAt: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := countWritebacks(t)
			f, err := os.Create(filepath.Join(t.TempDir(), "spool"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s := newSpool(f)
			chunk := bytes.Repeat([]byte{1}, mib)
			for i, q := range tc.qcow2 {
				if err := s.Truncate(0); err != nil {
					t.Fatal(err)
				}
				s.begin(3*flushStep, q)
				if i == len(tc.qcow2)-1 {
					n.Store(0) // count the last attempt only
				}
				w := &sparseWriter{f: s}
				for off := 0; off < 3*flushStep; off += mib {
					if _, err := w.Write(chunk); err != nil {
						t.Fatal(err)
					}
				}
			}
			s.end(nil) // waits for a writeback under way
			switch got := n.Load(); {
			case tc.wantAt && got < 1:
				t.Errorf("no writeback started for %d bytes", 3*flushStep)
			case !tc.wantAt && got != 0:
				t.Errorf("%d writebacks started, expected none", got)
			}
		})
	}
}

// TestConvertWriteback: qemu-img convert's output gets writeback started
// while it runs (on progress lines), and the image is right.
func TestConvertWriteback(t *testing.T) {
	fx := makeFixtures(t)
	n := countWritebacks(t)
	out := filepath.Join(t.TempDir(), "out.raw")
	if err := os.WriteFile(out, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := qemuConvertRaw(context.Background(), "qemu-img", "qcow2", filepath.Join(fx.dir, "src.qcow2"), out, nil); err != nil {
		t.Fatal(err)
	}
	if n.Load() < 1 {
		t.Error("no writeback started during the conversion")
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, fx.raw) {
		t.Error("converted image differs from the source")
	}
}

// TestFileWriteback: sync_file_range is accepted on a regular file.
func TestFileWriteback(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(bytes.Repeat([]byte{1}, mib)); err != nil {
		t.Fatal(err)
	}
	if err := fileWriteback(f); err != nil {
		t.Fatal(err)
	}
}
