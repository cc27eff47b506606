// Command guest builds the guest of converge's VM end-to-end tests from
// Debian packages only: the kernel of Debian's cloud flavour
// (linux-image-<abi>-cloud-amd64, the package the linux-image-cloud-amd64
// metapackage depends on today, asked from apt), an initramfs holding
// busybox-static, the kernel's module chain (guestModules: virtio_net,
// virtio_blk, isofs and their dependencies, as /lib/modules/<name>.ko
// plus /lib/modules/order, the insmod order), udhcpc.sh as
// /etc/udhcpc.sh and init.sh as /init, and a bootable disk holding both.
//
// On the serial console (console=ttyS0) init prints
// "CONVERGE-GUEST-OK <hostname> <kernel release> tick=<n>" every 2 s, and
// "CONVERGE-GUEST-DISK <vdX> <bytes>" for each virtio disk at the first
// tick and whenever its size changes (a disk grown online); the
// hostname comes from converge.hostname= on the kernel command line (or
// cloud-init's meta-data). With converge.ip=ADDR/PREFIX it gives eth0
// that address and prints "CONVERGE-GUEST-NET <hostname> mac=<eth0 MAC>
// ip=ADDR/PREFIX"; with converge.dhcp=1 every ethN asks DHCP and each
// lease prints "CONVERGE-GUEST-DHCP <hostname> ip=ADDR/PREFIX router=GW";
// with converge.ping=PEER it pings PEER every second until it answers,
// then prints "CONVERGE-GUEST-PING-OK <PEER>" once. With
// converge.cloudinit=1 it reads the NoCloud (ISO 9660 labelled cidata) or
// ConfigDrive (config-2) disk and prints each line of the user data as
// "CONVERGE-GUEST-USERDATA <line>" (init.sh has the details). Each
// virtio disk whose first sector starts with "CONVERGE-DATA <text>"
// prints "CONVERGE-GUEST-DATA <vdX> <text>" at boot; then a user-data line
// "converge-write <vdX> <text>" makes the guest write that line into the
// disk's first sector and print "CONVERGE-GUEST-WROTE <vdX> <text>".
//
// The disk, disk.img, is a raw image SeaBIOS boots by itself: a FAT16 file
// system with no partition table holding the kernel, the initramfs and a
// SYSLINUX configuration (syslinux.cfg: console=ttyS0 converge.dhcp=1
// converge.cloudinit=1), SYSLINUX in its boot sector (Debian's syslinux,
// syslinux-common, mtools and dosfstools, unpacked, not installed).
// disk.qcow2 is the same disk as compressed qcow2 (qemu-img, from
// qemu-utils, the one host tool it needs).
//
// Usage (as root or with apt's download rights, after apt-get update):
//
//	cd hack/guest && go run . -out ../../bin/guest
//
// It writes <out>/vmlinuz, <out>/initrd.gz, <out>/disk.img,
// <out>/disk.qcow2 and <out>/stamp. The stamp records the package
// versions, qemu-img's version and the hash of the files embedded here;
// when it matches, nothing is downloaded and the run takes well under a
// second. The outputs are reproducible: the initramfs has fixed
// modification times, sorted entries and a gzip header without a time
// stamp; the disk a fixed volume ID and fixed file times.
package main

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

var (
	//go:embed init.sh
	initScript []byte
	//go:embed udhcpc.sh
	udhcpcScript []byte
	//go:embed syslinux.cfg
	syslinuxConfig []byte
)

// builderVersion changes when the layout of the output changes (it is in
// the stamp, so a change rebuilds bin/guest). 2: the virtio_net modules.
// 3: virtio_blk and isofs, udhcpc.sh, disk.img and disk.qcow2.
const builderVersion = "3"

// outputs are the files build writes besides the stamp.
var outputs = []string{"vmlinuz", "initrd.gz", "disk.img", "disk.qcow2"}

const busyboxPath = "bin/busybox"

func main() {
	out := flag.String("out", "bin/guest", "output directory")
	withDebian := flag.Bool("debian", false, "also build debian.qcow2: Debian installed by debootstrap, booting with systemd, running cloud-init from its units (make demo's VM; needs root; debian.go)")
	flag.Parse()
	start := time.Now()
	cached, err := build(*out)
	if err == nil && *withDebian {
		var debianCached bool
		debianCached, err = buildDebian(*out)
		cached = cached && debianCached
	}
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

// stamp records what the outputs are made of.
func stamp(d debs, qemuImg string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "builder=%s\n%s=%s\n", builderVersion, d.kernel, d.kernelVersion)
	for _, n := range toolNames() {
		fmt.Fprintf(&b, "%s=%s\n", n, d.versions[n])
	}
	fmt.Fprintf(&b, "qemu-img=%s\nmodules=%s\n", qemuImg, strings.Join(guestModules(), ","))
	for _, f := range []struct {
		name string
		body []byte
	}{{"init.sh", initScript}, {"udhcpc.sh", udhcpcScript}, {"syslinux.cfg", syslinuxConfig}} {
		fmt.Fprintf(&b, "%s=%x\n", f.name, sha256.Sum256(f.body))
	}
	return b.String()
}

// build writes the guest into out unless its stamp is current; it reports
// whether it was.
func build(out string) (cached bool, err error) {
	d, err := packages()
	if err != nil {
		return false, err
	}
	qemuImg, err := qemuImgVersion()
	if err != nil {
		return false, err
	}
	st := stamp(d, qemuImg)
	if current(out, "stamp", st, outputs) {
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
	if _, err := run(tmp, "apt-get", append([]string{"download", "-q"}, d.specs()...)...); err != nil {
		return false, err
	}
	files, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(files) != len(d.specs()) {
		return false, fmt.Errorf("%s: expected %d downloaded .deb files (%v), found %d", tmp, len(d.specs()), d.specs(), len(files))
	}
	for _, f := range files {
		if _, err := run(tmp, "dpkg-deb", "-x", f, root); err != nil {
			return false, err
		}
	}
	kernels, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(kernels) != 1 {
		return false, fmt.Errorf("%s %s: expected one boot/vmlinuz-*, found %v", d.kernel, d.kernelVersion, kernels)
	}
	kernel, err := os.ReadFile(kernels[0])
	if err != nil {
		return false, err
	}
	busybox, err := os.ReadFile(filepath.Join(root, busyboxPath))
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", busyboxPkg, d.versions[busyboxPkg], err)
	}
	modules, err := findModules(root, guestModules())
	if err == nil {
		err = checkOrder(modules)
	}
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", d.kernel, d.kernelVersion, err)
	}
	initrd, err := initramfs(busybox, modules)
	if err != nil {
		return false, err
	}
	img, err := diskImage(root, filepath.Join(tmp, "disk"), kernel, initrd)
	if err != nil {
		return false, err
	}
	qcow, err := qcow2(img)
	if err != nil {
		return false, err
	}
	// the stamp goes first, so an interrupted build is not taken for a
	// current one
	if err := os.Remove(filepath.Join(out, "stamp")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	for _, w := range []struct {
		name string
		body []byte
		from string
	}{{name: "vmlinuz", body: kernel}, {name: "initrd.gz", body: initrd}, {name: "disk.img", from: img}, {name: "disk.qcow2", from: qcow}} {
		if w.from != "" {
			err = copyFile(w.from, filepath.Join(out, w.name))
		} else {
			err = writeAtomic(filepath.Join(out, w.name), w.body)
		}
		if err != nil {
			return false, err
		}
	}
	return false, writeAtomic(filepath.Join(out, "stamp"), []byte(st))
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

// current reports whether dir's stamp file holds want and every name
// exists.
func current(dir, stampFile, want string, names []string) bool {
	old, err := os.ReadFile(filepath.Join(dir, stampFile))
	return err == nil && string(old) == want && allExist(dir, names)
}

func allExist(dir string, names []string) bool {
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			return false
		}
	}
	return true
}
