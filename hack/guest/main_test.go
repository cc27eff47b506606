package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
		"etc/udhcpc.sh":              string(udhcpcScript),
	}
	for name, body := range want {
		if got, ok := files[name]; !ok || got != body {
			t.Errorf("%s: %q (present %v), want %q", name, got, ok, body)
		}
	}
	for _, marker := range []string{"converge.ip=", "converge.ping=", "CONVERGE-GUEST-NET", "CONVERGE-GUEST-PING-OK", "CONVERGE-GUEST-OK", "/lib/modules/order",
		"converge.dhcp=1", "udhcpc -i", "/etc/udhcpc.sh", "converge.cloudinit=1", "cidata) kind=nocloud", "config-2) kind=configdrive",
		"/mnt/user-data", "/mnt/openstack/latest/user_data", "local-hostname", "CONVERGE-GUEST-USERDATA", "CONVERGE-GUEST-CLOUDINIT none",
		"\ndatadisks\ndiskwrites \"$writes\"\n"} {
		if !strings.Contains(files["init"], marker) {
			t.Errorf("init.sh does not handle %q", marker)
		}
	}
	// the network helper parses this line: one per lease, exactly so
	if !strings.Contains(files["etc/udhcpc.sh"], `echo "CONVERGE-GUEST-DHCP $(hostname) ip=$ip/$mask router=$gw"`) {
		t.Errorf("udhcpc.sh does not print the CONVERGE-GUEST-DHCP line:\n%s", files["etc/udhcpc.sh"])
	}
}

// TestGuestModulesOrder: the chain loads each dependency before its
// users (shared notes, nodeplane.md §3; modinfo -F depends of Debian's
// 6.1 cloud kernel for virtio_blk and isofs); the build checks the
// kernel's own depends= too (checkOrder).
func TestGuestModulesOrder(t *testing.T) {
	pos := map[string]int{}
	for i, m := range guestModules() {
		pos[m] = i
	}
	for _, dep := range [][2]string{{"virtio_ring", "virtio"}, {"virtio", "virtio_pci"}, {"virtio_pci_modern_dev", "virtio_pci"}, {"virtio_pci_legacy_dev", "virtio_pci"}, {"failover", "net_failover"}, {"net_failover", "virtio_net"}, {"virtio_pci", "virtio_net"},
		{"virtio", "virtio_blk"}, {"virtio_ring", "virtio_blk"}, {"virtio_pci", "virtio_blk"}, {"cdrom", "isofs"}} {
		a, okA := pos[dep[0]]
		b, okB := pos[dep[1]]
		if !okA || !okB || a > b {
			t.Errorf("%s must be loaded before %s: %v", dep[0], dep[1], guestModules())
		}
	}
}

// ko is a module body whose .modinfo holds depends=deps, between other
// fields as the kernel writes them.
func ko(deps string) []byte {
	return []byte("\x7fELF junk\x00license=GPL\x00depends=" + deps + "\x00retpoline=Y\x00name=x\x00")
}

func TestModuleDepends(t *testing.T) {
	tests := []struct {
		name string
		body []byte
		want []string
	}{
		{"two", ko("virtio,virtio_ring"), []string{"virtio", "virtio_ring"}},
		{"none", ko(""), nil},
		{"no field", []byte("\x00license=GPL\x00"), nil},
		{"last field, no NUL after it", []byte("\x00depends=cdrom"), []string{"cdrom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := module{name: "m", body: tt.body}.depends()
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("depends %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCheckOrder(t *testing.T) {
	tests := []struct {
		name    string
		mods    []module
		wantErr string
	}{
		{"dependencies first", []module{{"cdrom", ko("")}, {"isofs", ko("cdrom")}}, ""},
		{"dependency after its user", []module{{"isofs", ko("cdrom")}, {"cdrom", ko("")}}, "module isofs depends on cdrom, which the chain [isofs cdrom] does not load before it"},
		{"dependency missing", []module{{"virtio_blk", ko("virtio,virtio_ring")}}, "module virtio_blk depends on virtio, which the chain [virtio_blk] does not load before it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkOrder(tt.mods)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestSyslinuxConfig: the disk boots the files diskImage writes, with
// the kernel arguments that make the guest find its network and
// cloud-init by itself.
func TestSyslinuxConfig(t *testing.T) {
	cfg := string(syslinuxConfig)
	var appendLine string
	for _, l := range strings.Split(cfg, "\n") {
		if a, ok := strings.CutPrefix(strings.TrimSpace(l), "APPEND "); ok {
			appendLine = a
		}
	}
	args := strings.Fields(appendLine)
	for _, want := range []string{"console=ttyS0", "converge.dhcp=1", "converge.cloudinit=1"} {
		if !slices.Contains(args, want) {
			t.Errorf("APPEND %q lacks %s", appendLine, want)
		}
	}
	for _, want := range []string{"DEFAULT guest", "LABEL guest", "KERNEL /vmlinuz", "INITRD /initrd.gz", "TIMEOUT 0"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("syslinux.cfg lacks %q:\n%s", want, cfg)
		}
	}
}

func TestDiskSizeMiB(t *testing.T) {
	for _, tt := range []struct{ payload, want int64 }{
		{0, diskHeadroom},
		{1, 1 + diskHeadroom},
		{mebibyte, 1 + diskHeadroom},
		{mebibyte + 1, 2 + diskHeadroom},
		{15 * mebibyte / 2, 8 + diskHeadroom},
	} {
		if got := diskSizeMiB(tt.payload); got != tt.want {
			t.Errorf("diskSizeMiB(%d) = %d, want %d", tt.payload, got, tt.want)
		}
	}
}

// TestStamp: every input of the outputs is in the stamp, so a change of
// any rebuilds them.
func TestStamp(t *testing.T) {
	base := debs{kernel: "linux-image-6.1.0-56-cloud-amd64", kernelVersion: "6.1.192-2", versions: map[string]string{}}
	for _, n := range toolNames() {
		base.versions[n] = "1.0"
	}
	with := func(f func(*debs)) debs {
		d := base
		d.versions = maps.Clone(base.versions)
		f(&d)
		return d
	}
	ref := stamp(base, "qemu-img version 7.2.22")
	for _, n := range append([]string{"builder=3", "linux-image-6.1.0-56-cloud-amd64=6.1.192-2", "qemu-img=qemu-img version 7.2.22",
		"modules=" + strings.Join(guestModules(), ","), "init.sh=", "udhcpc.sh=", "syslinux.cfg="}, toolNames()...) {
		if !strings.Contains(ref, n) {
			t.Errorf("stamp lacks %q:\n%s", n, ref)
		}
	}
	changes := map[string]string{
		"kernel version": stamp(with(func(d *debs) { d.kernelVersion = "6.1.193-1" }), "qemu-img version 7.2.22"),
		"kernel package": stamp(with(func(d *debs) { d.kernel = "linux-image-6.1.0-57-cloud-amd64" }), "qemu-img version 7.2.22"),
		"qemu-img":       stamp(base, "qemu-img version 8.0.0"),
	}
	for _, n := range toolNames() {
		changes[n] = stamp(with(func(d *debs) { d.versions[n] = "2.0" }), "qemu-img version 7.2.22")
	}
	for what, s := range changes {
		if s == ref {
			t.Errorf("a new %s leaves the stamp as it was", what)
		}
	}
}
