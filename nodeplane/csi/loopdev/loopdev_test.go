//go:build linux

package loopdev

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatal("loop devices need root (CAP_SYS_ADMIN) and CONVERGE_REQUIRE_NODEPLANE=1 is set")
		}
		t.Skip("loop devices need root (CAP_SYS_ADMIN); set CONVERGE_REQUIRE_NODEPLANE=1 to make this a failure")
	}
}

// TestAttachFindDetach attaches a sparse file, finds it by inode (also through
// a renamed path), writes through the device and reads the bytes back from the
// file, then detaches and finds nothing.
func TestAttachFindDetach(t *testing.T) {
	requireRoot(t)
	path := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	dev, err := Attach(f, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Detach(dev) })
	renamed := path + ".moved"
	if err := os.Rename(path, renamed); err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(renamed)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	found, err := Find(g)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(found, []string{dev}) {
		t.Fatalf("Find(%s) = %v, want [%s]", renamed, found, dev)
	}
	d, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteAt([]byte("converge"), 4096); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	buf := make([]byte, 8)
	if _, err := g.ReadAt(buf, 4096); err != nil {
		t.Fatal(err)
	}
	if string(buf) != "converge" {
		t.Fatalf("backing file at 4096 = %q, want %q", buf, "converge")
	}
	if err := Detach(dev); err != nil {
		t.Fatal(err)
	}
	if err := Detach(dev); err != nil {
		t.Fatalf("second Detach(%s) = %v, want nil", dev, err)
	}
	found, err = Find(g)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 0 {
		t.Fatalf("Find after Detach = %v, want none", found)
	}
}
