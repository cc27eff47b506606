package main

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/filesystem"
)

// requireBuild skips t when the build cannot run here (no apt, dpkg-deb
// or qemu-img), or fails it when CONVERGE_REQUIRE_NODEPLANE=1 (CI).
func requireBuild(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"apt-get", "apt-cache", "dpkg-deb", "qemu-img"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
				t.Fatalf("%s not found (CONVERGE_REQUIRE_NODEPLANE=1 is set)", bin)
			}
			t.Skipf("%s not found: the guest is built from Debian packages", bin)
		}
	}
}

// TestBuild builds the guest from Debian's packages into two directories
// and checks the outputs: the same bytes both times (reproducible); a
// second run on a current stamp builds nothing; disk.img is a FAT16 file
// system (read with go-diskfs, not the tools that wrote it) holding the
// kernel, the initramfs and syslinux.cfg as build wrote them, and
// SYSLINUX (ldlinux.sys, ldlinux.c32, its boot sector with the 0x55AA
// signature SeaBIOS checks); disk.qcow2 is a qcow2 image of the same
// disk (qemu-img compare). The real boot is internal/e2e's
// TestGuestBootsFromDisk.
func TestBuild(t *testing.T) {
	requireBuild(t)
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		cached, err := build(dir)
		if err != nil {
			t.Fatal(err)
		}
		if cached {
			t.Fatalf("%s: the first build says it was up to date", dir)
		}
	}
	if cached, err := build(a); err != nil || !cached {
		t.Errorf("second build in %s: cached %v, %v; want nothing built", a, cached, err)
	}
	for _, n := range append(slices.Clone(outputs), "stamp") {
		ha, hb := sha256File(t, filepath.Join(a, n)), sha256File(t, filepath.Join(b, n))
		if ha != hb {
			t.Errorf("%s differs between two builds: %s, %s", n, ha, hb)
		}
	}

	img := filepath.Join(a, "disk.img")
	raw, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if raw[510] != 0x55 || raw[511] != 0xaa {
		t.Errorf("disk.img sector 0 ends with %#x %#x, want the boot signature 0x55 0xaa", raw[510], raw[511])
	}
	if !bytes.Contains(raw[:512], []byte("SYSLINUX")) {
		t.Errorf("disk.img sector 0 is not SYSLINUX's boot sector: %q", raw[:512])
	}
	d, err := diskfs.Open(img, diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fs, err := d.GetFilesystem(0) // the whole disk: no partition table
	if err != nil {
		t.Fatalf("disk.img: %v", err)
	}
	if fs.Type() != filesystem.TypeFat16 {
		t.Errorf("disk.img: file system type %v, want FAT16", fs.Type())
	}
	if l := strings.TrimSpace(fs.Label()); l != diskLabel {
		t.Errorf("disk.img: label %q, want %q", l, diskLabel)
	}
	entries, err := fs.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, strings.ToLower(e.Name()))
	}
	for _, want := range []string{"ldlinux.sys", "ldlinux.c32"} {
		if !slices.Contains(names, want) {
			t.Errorf("disk.img: / holds %v, no %s (syslinux --install)", names, want)
		}
	}
	for name, want := range map[string][]byte{
		"vmlinuz":      readFile(t, filepath.Join(a, "vmlinuz")),
		"initrd.gz":    readFile(t, filepath.Join(a, "initrd.gz")),
		"syslinux.cfg": syslinuxConfig,
	} {
		f, err := fs.OpenFile(name, os.O_RDONLY)
		if err != nil {
			t.Errorf("disk.img: %s: %v", name, err)
			continue
		}
		got, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("disk.img: %s has %d bytes (sha256 %x), want the %d of the build (sha256 %x)", name, len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
		}
	}

	qcow := filepath.Join(a, "disk.qcow2")
	if out, err := run("", "qemu-img", "info", "--output=json", qcow); err != nil || !strings.Contains(out, `"format": "qcow2"`) {
		t.Errorf("qemu-img info disk.qcow2: %v\n%s", err, out)
	}
	if out, err := run("", "qemu-img", "compare", "-f", "raw", "-F", "qcow2", img, qcow); err != nil {
		t.Errorf("disk.qcow2 is not disk.img: %v\n%s", err, out)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b := readFile(t, path)
	h := sha256.Sum256(b)
	return string(h[:])
}
