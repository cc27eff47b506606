package hostpath

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// extent is data written at an offset of a test file.
type extent struct {
	off  int64
	data []byte
}

// writeSparse creates path of size bytes with the extents written and holes
// everywhere else.
func writeSparse(t testing.TB, path string, size int64, exts ...extent) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for _, e := range exts {
		if _, err := f.WriteAt(e.data, e.off); err != nil {
			t.Fatal(err)
		}
	}
}

// allocated is the bytes of disk a file uses (st_blocks × 512).
func allocated(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Blocks * 512
}

// TestCopyFile copies files of several shapes with copyFile and checks the
// copy has the same bytes and size, and (on this filesystem, by reflink or
// sparse copy) allocates no more than the source: holes stay holes.
func TestCopyFile(t *testing.T) {
	mib := bytes.Repeat([]byte{0xab}, 1<<20)
	for _, tc := range []struct {
		name string
		size int64
		exts []extent
	}{
		{"empty", 0, nil},
		{"all hole", 16 << 20, nil},
		{"data at start", 8 << 20, []extent{{0, mib}}},
		{"data at end", 8 << 20, []extent{{7 << 20, mib}}},
		{"data unaligned, short tail", 5<<20 + 17, []extent{{3, []byte("hello")}, {2<<20 + 5, mib}, {5 << 20, bytes.Repeat([]byte{1}, 17)}}},
		{"dense", 3 << 20, []extent{{0, mib}, {1 << 20, mib}, {2 << 20, mib}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			srcPath, dstPath := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			writeSparse(t, srcPath, tc.size, tc.exts...)
			src, err := os.Open(srcPath)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			dst, err := os.OpenFile(dstPath, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Close()
			method, err := copyFile(dst, src)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := os.ReadFile(srcPath)
			got, _ := os.ReadFile(dstPath)
			if !bytes.Equal(got, want) {
				t.Fatalf("copy (%v) differs from the source (%d vs %d bytes)", method, len(got), len(want))
			}
			if a, b := allocated(t, dstPath), allocated(t, srcPath); method == copySparse && a > b {
				t.Errorf("sparse copy allocates %d bytes, source %d: holes were filled", a, b)
			}
		})
	}
}

// TestCopyTreeHostile copies a tree a pod could have written: symlinks out
// of the tree (absolute, relative, dangling, to a directory), a FIFO, a
// nested sparse file, modes. The copy has the same entries (symlinks as
// symlinks, same targets), bytes and modes, and nothing outside the
// source and destination changed (no link was followed).
func TestCopyTreeHostile(t *testing.T) {
	base := t.TempDir()
	outside, src, dst := filepath.Join(base, "outside"), filepath.Join(base, "src"), filepath.Join(base, "dst")
	for _, d := range []string{outside, filepath.Join(src, "a", "b", "c"), dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "victim"), []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeSparse(t, filepath.Join(src, "a", "b", "c", "disk"), 16<<20, extent{4 << 20, []byte("deep data")})
	if err := os.WriteFile(filepath.Join(src, "exec"), []byte("#!/bin/sh\n"), 0o751); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"abs":      filepath.Join(outside, "victim"),
		"rel":      "../outside/victim",
		"dir":      outside,
		"dangling": "/nonexistent/x",
		"a/up":     "../../..",
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(src, l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(filepath.Join(src, "fifo"), 0o620); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "a"), 0o705); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, outside)
	srcSnap := snapshot(t, src)

	sf, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	df, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	stats, err := copyTree(df, sf)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Copied+stats.Reflinked != 2 {
		t.Errorf("copyTree stats %+v: want 2 regular files", stats)
	}
	if diff := before.diff(snapshot(t, outside)); diff != "" {
		t.Fatalf("outside changed:\n%s", diff)
	}
	if diff := srcSnap.diff(snapshot(t, src)); diff != "" {
		t.Fatalf("source changed:\n%s", diff)
	}
	// Same relative entries, types, modes, sizes, contents, link targets
	// (directory mtimes are compared as well: copied after their contents).
	rel := func(s fsSnapshot, root string) fsSnapshot {
		out := fsSnapshot{}
		for k, v := range s {
			r, _ := filepath.Rel(root, k)
			out[r] = v
		}
		return out
	}
	if diff := rel(srcSnap, src).diff(rel(snapshot(t, dst), dst)); diff != "" {
		t.Errorf("copy differs from the source:\n%s", diff)
	}
	if a, b := allocated(t, filepath.Join(dst, "a", "b", "c", "disk")), allocated(t, filepath.Join(src, "a", "b", "c", "disk")); a > b {
		t.Errorf("nested sparse file: copy allocates %d bytes, source %d", a, b)
	}
}

// TestCopyTreeTooDeep refuses a tree nested deeper than maxTreeDepth.
func TestCopyTreeTooDeep(t *testing.T) {
	base := t.TempDir()
	p := filepath.Join(base, "src")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	cur := d
	for range maxTreeDepth + 2 {
		if err := unix.Mkdirat(int(cur.Fd()), "d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := openAt(cur, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if cur != d {
			cur.Close()
		}
		cur = next
	}
	cur.Close()
	defer d.Close()
	if err := os.Mkdir(filepath.Join(base, "dst"), 0o755); err != nil {
		t.Fatal(err)
	}
	df, err := os.Open(filepath.Join(base, "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	if _, err := copyTree(df, d); err == nil || !bytes.Contains([]byte(err.Error()), []byte("deeper than")) {
		t.Errorf("copyTree of a %d-level tree = %v, want a depth error", maxTreeDepth+2, err)
	}
}
