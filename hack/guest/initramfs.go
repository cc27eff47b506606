package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cavaliergopher/cpio"
)

// netModules is the virtio_net module chain of Debian's cloud kernel,
// which builds virtio_pci and virtio_net as modules, in insmod
// (dependency) order (shared notes, nodeplane.md §3).
var netModules = []string{"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci", "failover", "net_failover", "virtio_net"}

// diskModules follow netModules: virtio_blk for the VM's disks (a
// cloud-init disk is one) and isofs, with cdrom, which it depends on,
// for the NoCloud and ConfigDrive ISO 9660 file systems (the cloud
// kernel builds all three as modules).
var diskModules = []string{"virtio_blk", "cdrom", "isofs"}

// guestModules is the whole chain /init loads, in insmod order.
func guestModules() []string { return append(slices.Clone(netModules), diskModules...) }

// module is one kernel module for the initramfs.
type module struct {
	name string
	body []byte
}

// findModules reads the modules names (without .ko) from the unpacked
// kernel package at root (lib/modules/<release>/kernel/...), in the order
// of names; a module missing, compressed or found twice is an error naming
// it.
func findModules(root string, names []string) ([]module, error) {
	want := map[string]string{}
	for _, n := range names {
		want[n+".ko"] = ""
	}
	base := filepath.Join(root, "lib", "modules")
	err := filepath.WalkDir(base, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if prev, ok := want[d.Name()]; ok {
			if prev != "" {
				return fmt.Errorf("module %s: found twice, %s and %s", d.Name(), prev, path)
			}
			want[d.Name()] = path
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]module, 0, len(names))
	for _, n := range names {
		path := want[n+".ko"]
		if path == "" {
			return nil, fmt.Errorf("module %s: expected %s.ko (uncompressed, busybox insmod reads no .ko.xz) under %s", n, n, base)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, module{name: n, body: b})
	}
	return out, nil
}

// depends gives the modules m depends on: the depends= field of its
// .modinfo section (NUL-terminated key=value strings, as modinfo -F
// depends prints them).
func (m module) depends() []string {
	const key = "\x00depends="
	i := bytes.Index(m.body, []byte(key))
	if i < 0 {
		return nil
	}
	v := m.body[i+len(key):]
	if end := bytes.IndexByte(v, 0); end >= 0 {
		v = v[:end]
	}
	var out []string
	for _, d := range strings.Split(string(v), ",") {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

// checkOrder fails when a module depends on one that is not loaded
// before it (busybox insmod resolves nothing itself).
func checkOrder(mods []module) error {
	loaded := map[string]bool{}
	for _, m := range mods {
		for _, d := range m.depends() {
			if !loaded[d] {
				var names []string
				for _, m := range mods {
					names = append(names, m.name)
				}
				return fmt.Errorf("module %s depends on %s, which the chain %v does not load before it", m.name, d, names)
			}
		}
		loaded[m.name] = true
	}
	return nil
}

// initramfs gives a gzip'd newc cpio archive with busybox as /bin/busybox,
// the modules as /lib/modules/<name>.ko with their names in
// /lib/modules/order (one a line, insmod order), init.sh as /init and
// udhcpc.sh as /etc/udhcpc.sh. /dev is empty: init mounts devtmpfs first
// and then opens /dev/console itself.
func initramfs(busybox []byte, modules []module) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	w := cpio.NewWriter(zw)
	epoch := time.Unix(0, 0)
	ino := int64(0)
	add := func(name string, mode cpio.FileMode, body []byte) error {
		ino++
		h := &cpio.Header{Name: name, Mode: mode, Size: int64(len(body)), Links: 1, ModTime: epoch, Inode: ino}
		if mode&cpio.TypeDir != 0 {
			h.Links = 2
		}
		if err := w.WriteHeader(h); err != nil {
			return fmt.Errorf("initramfs %s: %w", name, err)
		}
		_, err := w.Write(body)
		return err
	}
	for _, d := range []string{"bin", "dev", "etc", "lib", "lib/modules", "mnt", "proc", "sbin", "sys", "tmp", "usr", "usr/bin", "usr/sbin"} {
		if err := add(d, cpio.TypeDir|0o755, nil); err != nil {
			return nil, err
		}
	}
	if err := add("bin/busybox", cpio.TypeReg|0o755, busybox); err != nil {
		return nil, err
	}
	var order strings.Builder
	for _, m := range modules {
		if err := add("lib/modules/"+m.name+".ko", cpio.TypeReg|0o644, m.body); err != nil {
			return nil, err
		}
		order.WriteString(m.name + "\n")
	}
	if err := add("lib/modules/order", cpio.TypeReg|0o644, []byte(order.String())); err != nil {
		return nil, err
	}
	if err := add("etc/udhcpc.sh", cpio.TypeReg|0o755, udhcpcScript); err != nil {
		return nil, err
	}
	if err := add("init", cpio.TypeReg|0o755, initScript); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
