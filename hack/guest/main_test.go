package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cavaliergopher/cpio"
)

// unpacked writes files (path relative to an unpacked package root →
// body) and gives the root.
func unpacked(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, body := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestFindModules(t *testing.T) {
	const k = "lib/modules/6.1.0-56-cloud-amd64/kernel/"
	tests := []struct {
		name    string
		files   map[string]string
		want    []string // bodies, in names order
		wantErr string
	}{
		{
			name:  "found in the kernel tree, in the order asked",
			files: map[string]string{k + "drivers/net/virtio_net.ko": "net", k + "drivers/virtio/virtio.ko": "virtio", k + "drivers/virtio/virtio_pci.ko": "other"},
			want:  []string{"virtio", "net"},
		},
		{
			name:    "missing",
			files:   map[string]string{k + "drivers/virtio/virtio.ko": "virtio"},
			wantErr: "module virtio_net: expected virtio_net.ko",
		},
		{
			name:    "compressed only",
			files:   map[string]string{k + "drivers/virtio/virtio.ko": "virtio", k + "drivers/net/virtio_net.ko.xz": "xz"},
			wantErr: "module virtio_net: expected virtio_net.ko (uncompressed",
		},
		{
			name:    "twice",
			files:   map[string]string{k + "drivers/virtio/virtio.ko": "a", k + "extra/virtio.ko": "b", k + "drivers/net/virtio_net.ko": "net"},
			wantErr: "module virtio.ko: found twice",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mods, err := findModules(unpacked(t, tt.files), []string{"virtio", "virtio_net"})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range mods {
				got = append(got, string(m.body))
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("bodies %q, want %q", got, tt.want)
			}
		})
	}
}

// TestInitramfs reads the archive back: /init is init.sh, busybox and the
// modules are there, /lib/modules/order lists the modules in insmod
// order, and two builds are byte for byte the same.
func TestInitramfs(t *testing.T) {
	mods := []module{{"virtio_ring", []byte("ring")}, {"virtio", []byte("virtio")}, {"virtio_net", []byte("net")}}
	a, err := initramfs([]byte("busybox"), mods)
	if err != nil {
		t.Fatal(err)
	}
	b, err := initramfs([]byte("busybox"), mods)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two builds of the same initramfs differ")
	}
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	r := cpio.NewReader(zr)
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = string(body)
	}
	want := map[string]string{
		"init":                       string(initScript),
		"bin/busybox":                "busybox",
		"lib/modules/virtio_ring.ko": "ring",
		"lib/modules/virtio.ko":      "virtio",
		"lib/modules/virtio_net.ko":  "net",
		"lib/modules/order":          "virtio_ring\nvirtio\nvirtio_net\n",
	}
	for name, body := range want {
		if got, ok := files[name]; !ok || got != body {
			t.Errorf("%s: %q (present %v), want %q", name, got, ok, body)
		}
	}
	for _, marker := range []string{"converge.ip=", "converge.ping=", "CONVERGE-GUEST-NET", "CONVERGE-GUEST-PING-OK", "CONVERGE-GUEST-OK", "/lib/modules/order"} {
		if !strings.Contains(files["init"], marker) {
			t.Errorf("init.sh does not handle %q", marker)
		}
	}
}

// TestNetModulesOrder: the chain ends with virtio_net and loads each
// dependency before its users (shared notes, nodeplane.md §3).
func TestNetModulesOrder(t *testing.T) {
	pos := map[string]int{}
	for i, m := range netModules {
		pos[m] = i
	}
	for _, dep := range [][2]string{{"virtio_ring", "virtio"}, {"virtio", "virtio_pci"}, {"virtio_pci_modern_dev", "virtio_pci"}, {"virtio_pci_legacy_dev", "virtio_pci"}, {"failover", "net_failover"}, {"net_failover", "virtio_net"}, {"virtio_pci", "virtio_net"}} {
		a, okA := pos[dep[0]]
		b, okB := pos[dep[1]]
		if !okA || !okB || a > b {
			t.Errorf("%s must be loaded before %s: %v", dep[0], dep[1], netModules)
		}
	}
}
