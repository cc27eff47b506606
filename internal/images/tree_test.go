package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readTar gives the headers of a tar, in order.
func readTar(t *testing.T, b []byte) []*tar.Header {
	t.Helper()
	var hdrs []*tar.Header
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, h)
	}
}

// TestWriteTar: entries come sorted with their missing parents first,
// every time at the epoch, owner 0 without names, modes with the special
// bits, and the bytes do not depend on the order of the adds.
func TestWriteTar(t *testing.T) {
	src := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(src, []byte("from disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	adds := []func(*Tree) error{
		func(tr *Tree) error { return tr.File("usr/bin/b", []byte("bee"), 0o755, "test") },
		func(tr *Tree) error { return tr.CopyFile("usr/bin/a", src, fs.ModeSetuid|0o755, "test") },
		func(tr *Tree) error { return tr.Dir("tmp", fs.ModeSticky|0o777, "test") },
		func(tr *Tree) error { return tr.Symlink("bin", "usr/bin", "test") },
		func(tr *Tree) error { return tr.File("etc/x-y", []byte("z"), 0o644, "test") },
		func(tr *Tree) error { return tr.File("etc/x/z", []byte("z"), 0o644, "test") },
	}
	epoch := time.Unix(1700000000, 0)
	build := func(order []int) []byte {
		tr := NewTree()
		for _, i := range order {
			if err := adds[i](tr); err != nil {
				t.Fatal(err)
			}
		}
		var buf bytes.Buffer
		if err := tr.WriteTar(&buf, epoch); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	a, b := build([]int{0, 1, 2, 3, 4, 5}), build([]int{5, 3, 1, 4, 0, 2})
	counted := NewTree()
	for _, add := range adds {
		if err := add(counted); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(a, b) {
		t.Fatal("the tar depends on the order of the adds")
	}
	want := []struct {
		name string
		typ  byte
		mode int64
	}{
		{"bin", tar.TypeSymlink, 0o777},
		{"etc/", tar.TypeDir, 0o755},
		{"etc/x-y", tar.TypeReg, 0o644},
		{"etc/x/", tar.TypeDir, 0o755},
		{"etc/x/z", tar.TypeReg, 0o644},
		{"tmp/", tar.TypeDir, 0o1777},
		{"usr/", tar.TypeDir, 0o755},
		{"usr/bin/", tar.TypeDir, 0o755},
		{"usr/bin/a", tar.TypeReg, 0o4755},
		{"usr/bin/b", tar.TypeReg, 0o755},
	}
	hdrs := readTar(t, a)
	if counted.Len() != len(hdrs) {
		t.Errorf("Len() = %d, the tar has %d entries", counted.Len(), len(hdrs))
	}
	if len(hdrs) != len(want) {
		var names []string
		for _, h := range hdrs {
			names = append(names, h.Name)
		}
		t.Fatalf("entries %q, want %d", names, len(want))
	}
	for i, w := range want {
		h := hdrs[i]
		if h.Name != w.name || h.Typeflag != w.typ || h.Mode != w.mode {
			t.Errorf("entry %d: %s type %c mode %o, want %s type %c mode %o", i, h.Name, h.Typeflag, h.Mode, w.name, w.typ, w.mode)
		}
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %s uid %d gid %d uname %q gname %q, want the epoch and root without names", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
		}
	}
}

// TestTreeConflicts: a path added twice must be the same thing.
func TestTreeConflicts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		first   func(*Tree) error
		second  func(*Tree) error
		wantErr string
	}{
		{"same file twice", func(tr *Tree) error { return tr.File("a", []byte("x"), 0o644, "p1") },
			func(tr *Tree) error { return tr.File("a", []byte("x"), 0o644, "p2") }, ""},
		{"two directories", func(tr *Tree) error { return tr.Dir("d", 0o755, "p1") },
			func(tr *Tree) error { return tr.Dir("d", 0o700, "p2") }, ""},
		{"files with other bytes", func(tr *Tree) error { return tr.File("a", []byte("x"), 0o644, "p1") },
			func(tr *Tree) error { return tr.File("a", []byte("y"), 0o644, "p2") },
			"/a: added by p1 as a 1-byte file of mode -rw-r--r-- and by p2 as a 1-byte file of mode -rw-r--r--"},
		{"files with other modes", func(tr *Tree) error { return tr.File("a", []byte("x"), 0o644, "p1") },
			func(tr *Tree) error { return tr.File("a", []byte("x"), 0o755, "p2") }, "added by p1"},
		{"file over directory", func(tr *Tree) error { return tr.Dir("a", 0o755, "p1") },
			func(tr *Tree) error { return tr.File("a", nil, 0o644, "p2") }, "/a: added by p1 as a directory and by p2 as a 0-byte file"},
		{"symlinks to other targets", func(tr *Tree) error { return tr.Symlink("l", "x", "p1") },
			func(tr *Tree) error { return tr.Symlink("l", "y", "p2") }, "added by p1 as a symlink to x and by p2 as a symlink to y"},
		{"unclean path", func(tr *Tree) error { return nil },
			func(tr *Tree) error { return tr.File("/etc/passwd", nil, 0o644, "p") }, `image path "/etc/passwd": expected a clean relative path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTree()
			if err := tc.first(tr); err != nil {
				t.Fatal(err)
			}
			err := tc.second(tr)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestWriteTarParentNotDirectory: a file below a symlink or a file fails
// when written, naming both.
func TestWriteTarParentNotDirectory(t *testing.T) {
	tr := NewTree()
	if err := tr.Symlink("lib", "usr/lib", "merged /usr"); err != nil {
		t.Fatal(err)
	}
	if err := tr.File("lib/libx.so", nil, 0o644, "libx"); err != nil {
		t.Fatal(err)
	}
	err := tr.WriteTar(io.Discard, time.Unix(0, 0))
	if err == nil || !strings.Contains(err.Error(), "/lib/libx.so (libx): its parent /lib (merged /usr) is a symlink to usr/lib, not a directory") {
		t.Fatalf("error %v", err)
	}
}

// TestResolve follows links as the kernel would inside the image.
func TestResolve(t *testing.T) {
	tr := NewTree()
	for _, err := range []error{
		tr.Symlink("lib", "usr/lib", "t"),
		tr.Symlink("lib64", "usr/lib64", "t"),
		tr.File("usr/lib/x86_64-linux-gnu/libc.so.6", []byte("c"), 0o644, "t"),
		tr.File("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", []byte("ld"), 0o755, "t"),
		tr.Symlink("usr/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "t"),
		tr.Symlink("usr/lib/x86_64-linux-gnu/libz.so.1", "libz.so.1.2.13", "t"),
		tr.File("usr/lib/x86_64-linux-gnu/libz.so.1.2.13", []byte("z"), 0o644, "t"),
		tr.Symlink("usr/bin/kvm", "../lib/x86_64-linux-gnu/../../../usr/bin/qemu", "t"),
		tr.File("usr/bin/qemu", []byte("q"), 0o755, "t"),
		tr.Symlink("loop1", "loop2", "t"),
		tr.Symlink("loop2", "/loop1", "t"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ in, want, wantErr string }{
		{in: "/lib64/ld-linux-x86-64.so.2", want: "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		{in: "lib/x86_64-linux-gnu/libz.so.1", want: "usr/lib/x86_64-linux-gnu/libz.so.1.2.13"},
		{in: "usr/bin/kvm", want: "usr/bin/qemu"},
		{in: "lib/x86_64-linux-gnu/libnone.so", wantErr: "/usr/lib/x86_64-linux-gnu/libnone.so: no such file in the image"},
		{in: "usr/bin/qemu/x", wantErr: "/usr/bin/qemu: not a directory"},
		{in: "loop1", wantErr: "too many levels of symbolic links"},
	} {
		got, err := tr.Resolve(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Resolve(%q) = %q, %v; want error %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestImagePath: merged /usr and slimmed documentation.
func TestImagePath(t *testing.T) {
	for in, want := range map[string]string{
		"lib":                                     "usr/lib",
		"lib/x86_64-linux-gnu/libc.so.6":          "usr/lib/x86_64-linux-gnu/libc.so.6",
		"lib64/ld-linux-x86-64.so.2":              "usr/lib64/ld-linux-x86-64.so.2",
		"sbin/nft":                                "usr/sbin/nft",
		"bin/true":                                "usr/bin/true",
		"library/x":                               "library/x",
		"usr/bin/qemu-img":                        "usr/bin/qemu-img",
		"etc/libvirt/libvirt.conf":                "etc/libvirt/libvirt.conf",
		"usr/share/doc/libvirt0":                  "usr/share/doc/libvirt0",
		"usr/share/doc/libvirt0/copyright":        "usr/share/doc/libvirt0/copyright",
		"usr/share/doc/libvirt0/changelog.gz":     "",
		"usr/share/doc/libvirt0/examples/a":       "",
		"usr/share/doc/libvirt0/x/copyright":      "",
		"usr/share/man/man8/libvirtd.8.gz":        "",
		"usr/share/locale/de/LC_MESSAGES/x.mo":    "",
		"usr/share/lintian/overrides/libvirt0":    "",
		"usr/share/info/x.info.gz":                "",
		"usr/share/qemu/bios-256k.bin":            "usr/share/qemu/bios-256k.bin",
		"usr/share/ca-certificates/mozilla/a.crt": "usr/share/ca-certificates/mozilla/a.crt",
	} {
		if got := imagePath(in); got != want {
			t.Errorf("imagePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestParseSimulation reads apt-get install -s.
func TestParseSimulation(t *testing.T) {
	out := `NOTE: This is only a simulation!
Reading package lists...
The following NEW packages will be installed:
  libgcc-s1 qemu-utils
Inst gcc-12-base (12.2.0-14+deb12u1 Debian:12.15/oldstable [amd64])
Inst libgcc-s1 (12.2.0-14+deb12u1 Debian:12.15/oldstable [amd64]) []
Inst qemu-utils (1:7.2+dfsg-7+deb12u18+b3 Debian:12.15/oldstable, Debian-Security:12/oldstable-security [amd64])
Inst ipxe-qemu (1.0.0+git-20190125.36a4c85-5.1 Debian:12.15/oldstable [all])
Conf gcc-12-base (12.2.0-14+deb12u1 Debian:12.15/oldstable [amd64])
`
	got, err := parseSimulation(out, "/a")
	if err != nil {
		t.Fatal(err)
	}
	want := []Package{
		{"gcc-12-base", "12.2.0-14+deb12u1", "amd64", "/a/gcc-12-base_12.2.0-14+deb12u1_amd64.deb"},
		{"ipxe-qemu", "1.0.0+git-20190125.36a4c85-5.1", "all", "/a/ipxe-qemu_1.0.0+git-20190125.36a4c85-5.1_all.deb"},
		{"libgcc-s1", "12.2.0-14+deb12u1", "amd64", "/a/libgcc-s1_12.2.0-14+deb12u1_amd64.deb"},
		{"qemu-utils", "1:7.2+dfsg-7+deb12u18+b3", "amd64", "/a/qemu-utils_1%3a7.2+dfsg-7+deb12u18+b3_amd64.deb"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("package %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"Inst x", "Inst x (1.0 Debian:12)", "Inst x [0.9] (1.0 Debian:12 [amd64])", "Reading package lists..."} {
		if _, err := parseSimulation(bad, "/a"); err == nil {
			t.Errorf("parseSimulation(%q): no error", bad)
		}
	}
}

// TestProgressLines keeps apt's progress and problems only.
func TestProgressLines(t *testing.T) {
	var buf bytes.Buffer
	p := &progressLines{w: &buf}
	for _, chunk := range []string{"Reading package lists...\nGet:1 http://deb", ".debian.org/debian bookworm InRelease\n  libc6 libx\nE: Unable to fetch\nFetched 1 kB", " in 0s"} {
		p.Write([]byte(chunk))
	}
	p.flush()
	want := "Get:1 http://deb.debian.org/debian bookworm InRelease\nE: Unable to fetch\nFetched 1 kB in 0s\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
}
