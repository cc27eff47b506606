package vmtest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

var errNoModule = errors.New("no go.mod of github.com/converge-dev/converge above the working directory")

// RepoRoot gives the directory of converge's go.mod above the working
// directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(mod, []byte("module github.com/converge-dev/converge\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal(errNoModule)
		}
		dir = parent
	}
}

// BuildGuest runs hack/guest, which builds the guest kernel and initramfs
// and a disk booting them from Debian packages into <repo>/bin/guest
// (cached: under a second when the packages did not change), and gives
// that directory, holding vmlinuz and initrd.gz (kernelBoot), disk.img and
// disk.qcow2 (internal/testing/guestimage). It needs apt-get, dpkg-deb,
// apt lists (apt-get update) and qemu-img.
func BuildGuest(t testing.TB) string {
	t.Helper()
	for _, bin := range []string{"apt-get", "apt-cache", "dpkg-deb", "qemu-img"} {
		_, err := exec.LookPath(bin)
		Require(t, err == nil, "%s not found: the guest is built from Debian packages (qemu-img: qemu-utils)", bin)
	}
	root := RepoRoot(t)
	out := filepath.Join(root, "bin", "guest")
	cmd := exec.Command("go", "run", ".", "-out", out)
	cmd.Dir = filepath.Join(root, "hack", "guest")
	start := time.Now()
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/guest: %v:\n%s", err, b)
	}
	t.Logf("hack/guest (%s): %s", time.Since(start).Round(time.Millisecond), bytes.TrimSpace(b))
	return out
}

// BuildBinary builds the main package pkg (relative to the repository,
// like "./cmd/converge-node") into a temporary directory and gives the
// binary's path.
func BuildBinary(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = RepoRoot(t)
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v:\n%s", pkg, err, b)
	}
	t.Logf("go build %s: %s", pkg, time.Since(start).Round(time.Millisecond))
	return bin
}
