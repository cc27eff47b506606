package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The Debian system of make demo's VM: what debootstrap installs, with
// its maintainer scripts run (a system installed as Debian installs one,
// not a test guest): Debian's cloud kernel and its initramfs, systemd as
// init, Debian's cloud-init with its systemd units (their output goes to
// the console), and ifupdown with the ISC DHCP client, which cloud-init's
// fallback network configuration uses on Debian.
const (
	debianSuite  = "bookworm"
	debianMirror = "http://deb.debian.org/debian"
	// debianBuilder changes when the recipe below changes in a way the
	// stamp does not see.
	debianBuilder = "1"
	// debianMaxDisk bounds the disk's virtual size: the demo's DataVolume
	// asks for 2Gi.
	debianMaxDisk = 2 << 30
	// partitionStart is where the root partition starts (1 MiB, sector
	// 2048, as fdisk aligns it).
	partitionStart = 1 << 20
	// mbrPath is SYSLINUX's MBR boot code (syslinux-common), which boots
	// the active partition's extlinux.
	mbrPath = "/usr/lib/syslinux/mbr/mbr.bin"
)

// debianPackages are debootstrap's --include list (minbase variant).
// python3-cffi-backend is cloud-init's python3-cryptography's provider of
// python3-cffi-backend-api-min/max: debootstrap's resolver does not follow
// virtual packages, and cloud-init stays unconfigured without it.
var debianPackages = []string{"linux-image-cloud-amd64", "systemd-sysv", "udev", "cloud-init", "python3-cffi-backend",
	"ifupdown", "isc-dhcp-client", "netbase", "iproute2", "initramfs-tools"}

// debianTools are the host commands the build runs, and the Debian
// packages that have them.
var debianTools = map[string]string{"debootstrap": "debootstrap", "extlinux": "extlinux", "sfdisk": "fdisk",
	"mkfs.ext4": "e2fsprogs", "mount": "mount", "qemu-img": "qemu-utils"}

// installDebianTools installs, with apt-get, the packages of the
// debianTools missing from PATH and syslinux-common when mbrPath is
// missing (as root, as make demo's preflight installs containerd).
func installDebianTools() error {
	var missing []string
	for _, tool := range slices.Sorted(maps.Keys(debianTools)) {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, debianTools[tool])
		}
	}
	if _, err := os.Stat(mbrPath); err != nil {
		missing = append(missing, "syslinux-common")
	}
	if len(missing) == 0 {
		return nil
	}
	fmt.Printf("guest: installing %s with apt-get\n", strings.Join(missing, " "))
	_, err := runEnv("", []string{"DEBIAN_FRONTEND=noninteractive"}, "apt-get", append([]string{"install", "-y", "--no-install-recommends"}, missing...)...)
	return err
}

// debianFiles are the files the build writes into the installed system,
// by path below its root.
func debianFiles() map[string]string {
	return map[string]string{
		"etc/fstab": "LABEL=root / ext4 defaults 0 1\n",
		// The sources KubeVirt's VMs have: its cloudInitNoCloud and
		// cloudInitConfigDrive disks; no network metadata service to probe.
		// No SSH server is installed (the console is the way in): no
		// host keys to make; C.UTF-8 needs no locale generation.
		"etc/cloud/cloud.cfg.d/90-converge.cfg": "datasource_list: [ NoCloud, ConfigDrive, None ]\nssh_genkeytypes: []\nlocale: C.UTF-8\n",
		// systemd makes a machine ID at first boot.
		"etc/machine-id": "",
		// debootstrap copies the build host's name; cloud-init sets the
		// VM's from its meta-data.
		"etc/hostname": "debian\n",
		"etc/hosts":    "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n",
	}
}

// extlinuxConfig boots kernel and initrd (paths in the root file system)
// with the root file system labelled root and the console on the serial
// port, where KubeVirt's console (and converge vm console) reads it.
func extlinuxConfig(kernel, initrd string) string {
	return fmt.Sprintf("DEFAULT debian\nPROMPT 0\nTIMEOUT 0\nLABEL debian\n  LINUX %s\n  INITRD %s\n  APPEND root=LABEL=root ro console=ttyS0 net.ifnames=0\n", kernel, initrd)
}

// debianStamp records the recipe: the builder, the suite, the packages
// and the files written (debootstrap takes the suite's current versions;
// the build records them beside the stamp, in debian.packages).
func debianStamp() string {
	var b strings.Builder
	fmt.Fprintf(&b, "debian-builder=%s\nsuite=%s\nmirror=%s\npackages=%s\n", debianBuilder, debianSuite, debianMirror, strings.Join(debianPackages, ","))
	files := debianFiles()
	for _, p := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(&b, "%s=%x\n", p, sha256.Sum256([]byte(files[p])))
	}
	fmt.Fprintf(&b, "extlinux.conf=%x\n", sha256.Sum256([]byte(extlinuxConfig("K", "I"))))
	return b.String()
}

// buildDebian writes <out>/debian.qcow2 — a bootable Debian disk: an MBR
// with SYSLINUX's boot code and one active ext4 partition labelled root
// holding the system debootstrap installed, extlinux in /boot/extlinux —
// unless debian.stamp is current; it reports whether it was. It needs
// root (debootstrap, a loop mount for extlinux) and the debianTools.
func buildDebian(out string) (cached bool, err error) {
	st := debianStamp()
	if current(out, "debian.stamp", st, []string{"debian.qcow2"}) {
		return true, nil
	}
	if os.Geteuid() != 0 {
		return false, errors.New("the Debian disk needs root: debootstrap runs maintainer scripts in a chroot, extlinux a loop mount")
	}
	if err := installDebianTools(); err != nil {
		return false, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "converge-debian-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "root")
	fmt.Printf("guest: debootstrap %s (%s) into %s: a few minutes\n", debianSuite, strings.Join(debianPackages, ", "), root)
	if _, err := run(tmp, "debootstrap", "--variant=minbase", "--include="+strings.Join(debianPackages, ","), debianSuite, root, debianMirror); err != nil {
		return false, err
	}
	versions, err := run(tmp, "chroot", root, "dpkg-query", "-W", "-f", "${Package}=${Version}\n")
	if err != nil {
		return false, err
	}
	for _, dir := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		if err := clearDir(filepath.Join(root, dir)); err != nil {
			return false, err
		}
	}
	for p, body := range debianFiles() {
		if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o644); err != nil {
			return false, err
		}
	}
	kernel, err := onlyMatch(root, "boot/vmlinuz-*")
	if err != nil {
		return false, err
	}
	initrd, err := onlyMatch(root, "boot/initrd.img-*")
	if err != nil {
		return false, err
	}
	img, err := debianDisk(tmp, root, extlinuxConfig("/"+kernel, "/"+initrd))
	if err != nil {
		return false, err
	}
	qcow, err := qcow2(img)
	if err != nil {
		return false, err
	}
	if err := os.Remove(filepath.Join(out, "debian.stamp")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	if err := os.Rename(qcow, filepath.Join(out, "debian.qcow2")); err != nil {
		if err := copyFile(qcow, filepath.Join(out, "debian.qcow2")); err != nil {
			return false, err
		}
	}
	if err := writeAtomic(filepath.Join(out, "debian.packages"), []byte(versions)); err != nil {
		return false, err
	}
	return false, writeAtomic(filepath.Join(out, "debian.stamp"), []byte(st))
}

// debianDisk makes tmp/debian.img from the system in root: the ext4 file
// system made from root by mkfs.ext4 -d (no 64bit or metadata_csum
// features, which SYSLINUX 6.04 cannot read) placed at partitionStart,
// an MBR partition table with that one active partition, extlinux
// installed with config as its extlinux.conf, and SYSLINUX's MBR code.
func debianDisk(tmp, root, config string) (string, error) {
	used, err := run(tmp, "du", "-sb", root)
	if err != nil {
		return "", err
	}
	n, err := strconv.ParseInt(strings.Fields(used)[0], 10, 64)
	if err != nil {
		return "", fmt.Errorf("du %s: %q: %w", root, used, err)
	}
	size := (n*13/10 + 256<<20 + mebibyte - 1) / mebibyte * mebibyte // room for the journal, metadata and logs
	if size+partitionStart > debianMaxDisk {
		return "", fmt.Errorf("the Debian system takes %d bytes; its disk would be %d bytes, above %d (the demo's DataVolume)", n, size+partitionStart, debianMaxDisk)
	}
	fs, img := filepath.Join(tmp, "root.ext4"), filepath.Join(tmp, "debian.img")
	if err := sparseFile(fs, size); err != nil {
		return "", err
	}
	if _, err := run(tmp, "mkfs.ext4", "-q", "-F", "-L", "root", "-O", "^64bit,^metadata_csum", "-d", root, fs); err != nil {
		return "", err
	}
	if err := sparseFile(img, partitionStart+size); err != nil {
		return "", err
	}
	layout := fmt.Sprintf("label: dos\nstart=%d, type=83, bootable\n", partitionStart/512)
	cmd := exec.Command("sfdisk", "-q", img)
	cmd.Stdin = strings.NewReader(layout)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("sfdisk %s: %w: %s", img, err, b)
	}
	if _, err := run(tmp, "dd", "if="+fs, "of="+img, "bs=1M", fmt.Sprintf("seek=%d", partitionStart/mebibyte), "conv=notrunc,sparse"); err != nil {
		return "", err
	}
	mnt := filepath.Join(tmp, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return "", err
	}
	if _, err := run(tmp, "mount", "-o", fmt.Sprintf("loop,offset=%d", partitionStart), img, mnt); err != nil {
		return "", err
	}
	err = func() error {
		dir := filepath.Join(mnt, "boot", "extlinux")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "extlinux.conf"), []byte(config), 0o644); err != nil {
			return err
		}
		_, err := run(tmp, "extlinux", "--install", dir)
		return err
	}()
	if _, uerr := run(tmp, "umount", mnt); uerr != nil && err == nil {
		err = uerr
	}
	if err != nil {
		return "", err
	}
	if _, err := run(tmp, "dd", "if="+mbrPath, "of="+img, "bs=440", "count=1", "conv=notrunc"); err != nil {
		return "", err
	}
	return img, nil
}

// sparseFile creates path as a file of size bytes, all holes.
func sparseFile(path string, size int64) error {
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return err
	}
	return os.Truncate(path, size)
}

// onlyMatch gives the one path below root matching pattern, relative to
// root.
func onlyMatch(root, pattern string) (string, error) {
	m, _ := filepath.Glob(filepath.Join(root, pattern))
	if len(m) != 1 {
		return "", fmt.Errorf("%s: expected one %s, found %v", root, pattern, m)
	}
	return filepath.Rel(root, m[0])
}

// clearDir removes what dir holds, keeping dir.
func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
