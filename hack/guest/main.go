// Command guest builds the guest of converge's VM end-to-end test from
// Debian packages only: the kernel of Debian's cloud flavour
// (linux-image-<abi>-cloud-amd64, the package the linux-image-cloud-amd64
// metapackage depends on today, asked from apt) and an initramfs holding
// busybox-static, the kernel's virtio_net module chain (netModules, as
// /lib/modules/<name>.ko plus /lib/modules/order, the insmod order) and
// init.sh as /init. On the serial console (console=ttyS0) init prints
// "CONVERGE-GUEST-OK <hostname> <kernel release> tick=<n>" every 2 s; the
// hostname comes from converge.hostname= on the kernel command line. With
// converge.ip=ADDR/PREFIX it loads the modules, gives eth0 that address,
// prints "CONVERGE-GUEST-NET <hostname> mac=<eth0 MAC> ip=ADDR/PREFIX",
// and with converge.ping=PEER pings PEER every second until it answers,
// then prints "CONVERGE-GUEST-PING-OK <PEER>" once.
//
// Usage (as root or with apt's download rights, after apt-get update):
//
//	cd hack/guest && go run . -out ../../bin/guest
//
// It writes <out>/vmlinuz, <out>/initrd.gz and <out>/stamp. The stamp
// records the package versions and the hash of init.sh; when it matches,
// nothing is downloaded and the run takes well under a second. The
// initramfs is reproducible: fixed modification times, sorted entries and
// a gzip header without a time stamp.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cavaliergopher/cpio"
)

//go:embed init.sh
var initScript []byte

// builderVersion changes when the layout of the output changes (it is in
// the stamp, so a change rebuilds bin/guest). 2: the virtio_net modules.
const builderVersion = "2"

// netModules is the virtio_net module chain of Debian's cloud kernel,
// which builds virtio_pci and virtio_net as modules, in insmod
// (dependency) order (shared notes, nodeplane.md §3).
var netModules = []string{"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci", "failover", "net_failover", "virtio_net"}

const (
	kernelMeta  = "linux-image-cloud-amd64"
	busyboxPkg  = "busybox-static"
	busyboxPath = "bin/busybox"
)

func main() {
	out := flag.String("out", "bin/guest", "output directory")
	flag.Parse()
	start := time.Now()
	cached, err := build(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "guest:", err)
		os.Exit(1)
	}
	what := "built"
	if cached {
		what = "up to date"
	}
	fmt.Printf("guest: %s %s in %s\n", *out, what, time.Since(start).Round(time.Millisecond))
}

// build writes the guest into out unless its stamp is current; it reports
// whether it was.
func build(out string) (cached bool, err error) {
	kpkg, kver, bver, err := packages()
	if err != nil {
		return false, err
	}
	stamp := fmt.Sprintf("builder=%s\n%s=%s\n%s=%s\nmodules=%s\ninit.sh=%x\n", builderVersion, kpkg, kver, busyboxPkg, bver, strings.Join(netModules, ","), sha256.Sum256(initScript))
	if old, err := os.ReadFile(filepath.Join(out, "stamp")); err == nil && string(old) == stamp &&
		exists(filepath.Join(out, "vmlinuz")) && exists(filepath.Join(out, "initrd.gz")) {
		return true, nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "converge-guest-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "root")
	for _, p := range []string{kpkg + "=" + kver, busyboxPkg + "=" + bver} {
		if _, err := run(tmp, "apt-get", "download", "-q", p); err != nil {
			return false, err
		}
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 2 {
		return false, fmt.Errorf("%s: expected 2 downloaded .deb files, found %d", tmp, len(debs))
	}
	for _, d := range debs {
		if _, err := run(tmp, "dpkg-deb", "-x", d, root); err != nil {
			return false, err
		}
	}
	kernels, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(kernels) != 1 {
		return false, fmt.Errorf("%s %s: expected one boot/vmlinuz-*, found %v", kpkg, kver, kernels)
	}
	if err := copyFile(kernels[0], filepath.Join(out, "vmlinuz")); err != nil {
		return false, err
	}
	busybox, err := os.ReadFile(filepath.Join(root, busyboxPath))
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", busyboxPkg, bver, err)
	}
	modules, err := findModules(root, netModules)
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", kpkg, kver, err)
	}
	initrd, err := initramfs(busybox, modules)
	if err != nil {
		return false, err
	}
	if err := writeAtomic(filepath.Join(out, "initrd.gz"), initrd); err != nil {
		return false, err
	}
	return false, writeAtomic(filepath.Join(out, "stamp"), []byte(stamp))
}

// packages gives the cloud kernel package and version to use and the
// busybox-static version, from one apt-cache call (apt-cache rebuilds its
// cache on each call where Docker's apt config disables it, about 1 s):
// the kernel is the one the linux-image-cloud-amd64 metapackage depends
// on. Without the metapackage, it is the last
// linux-image-<abi>-cloud-amd64 apt-cache search lists.
func packages() (kpkg, kver, bver string, err error) {
	show, err := run("", "apt-cache", "show", "--no-all-versions", kernelMeta, busyboxPkg)
	if err != nil {
		// apt-cache show fails when one of them is unknown: ask separately
		if bver, err = candidate(busyboxPkg); err != nil {
			return "", "", "", err
		}
		if kpkg, err = searchKernel(); err != nil {
			return "", "", "", err
		}
		kver, err = candidate(kpkg)
		return kpkg, kver, bver, err
	}
	fields := stanzas(show)
	bver = fields[busyboxPkg]["Version"]
	for _, dep := range strings.Split(fields[kernelMeta]["Depends"], ",") {
		name, constraint, _ := strings.Cut(strings.TrimSpace(dep), " ")
		if strings.HasPrefix(name, "linux-image-") && strings.HasSuffix(name, "-cloud-amd64") {
			kpkg = name
			if v, ok := strings.CutPrefix(strings.Trim(constraint, "()"), "= "); ok {
				kver = v
			}
		}
	}
	if bver == "" || kpkg == "" {
		return "", "", "", fmt.Errorf("apt-cache show %s %s: expected a Version and a Depends on linux-image-<abi>-cloud-amd64, got:\n%s", kernelMeta, busyboxPkg, show)
	}
	if kver == "" {
		kver, err = candidate(kpkg)
	}
	return kpkg, kver, bver, err
}

// stanzas parses apt-cache show output into fields per package.
func stanzas(out string) map[string]map[string]string {
	all := map[string]map[string]string{}
	var cur map[string]string
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(l, ": ")
		if !ok || strings.HasPrefix(l, " ") {
			continue
		}
		if k == "Package" {
			cur = map[string]string{}
			all[v] = cur
		} else if cur != nil {
			cur[k] = strings.TrimSpace(v)
		}
	}
	return all
}

// searchKernel gives the last linux-image-<abi>-cloud-amd64 package
// apt-cache search lists.
func searchKernel() (string, error) {
	list, err := run("", "apt-cache", "search", "--names-only", `^linux-image-[0-9].*-cloud-amd64$`)
	if err != nil {
		return "", err
	}
	var names []string
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("apt: no %s and no linux-image-<abi>-cloud-amd64 package known (apt-get update?)", kernelMeta)
	}
	sort.Strings(names)
	return names[len(names)-1], nil
}

// candidate gives the version apt would install of pkg.
func candidate(pkg string) (string, error) {
	out, err := run("", "apt-cache", "show", "--no-all-versions", pkg)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "Version: "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("apt-cache show %s: no Version field", pkg)
}

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

// initramfs gives a gzip'd newc cpio archive with busybox as /bin/busybox,
// the modules as /lib/modules/<name>.ko with their names in
// /lib/modules/order (one a line, insmod order) and init.sh as /init.
// /dev is empty: init mounts devtmpfs first and then opens /dev/console
// itself.
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
	for _, d := range []string{"bin", "dev", "lib", "lib/modules", "proc", "sbin", "sys", "tmp", "usr", "usr/bin", "usr/sbin"} {
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

// run runs a command in dir and gives its standard output; the error
// quotes the command and its standard error.
func run(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, in); err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	return writeAtomic(to, b.Bytes())
}

// writeAtomic writes data to path through a temporary file and a rename,
// so a reader never sees half a kernel.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
