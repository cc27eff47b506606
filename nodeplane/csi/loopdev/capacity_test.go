//go:build linux

package loopdev

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSetCapacity grows the backing file of an attached device: the device
// keeps its old size until SetCapacity, then has the new one.
func TestSetCapacity(t *testing.T) {
	requireRoot(t)
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "disk.img"), os.O_CREATE|os.O_RDWR, 0o600)
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
	if err := f.Truncate(3 << 20); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		step string
		grow bool
		want int64
	}{{"before SetCapacity", false, 1 << 20}, {"after SetCapacity", true, 3 << 20}} {
		if tc.grow {
			n, err := SetCapacity(dev)
			if err != nil || n != tc.want {
				t.Fatalf("SetCapacity(%s) = %d, %v; want %d", dev, n, err, tc.want)
			}
		}
		if n, err := Size(d); err != nil || n != tc.want {
			t.Errorf("%s: Size(%s) = %d, %v; want %d", tc.step, dev, n, err, tc.want)
		}
	}
}
