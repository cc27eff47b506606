package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// The FAT file system of disk.img: its volume label and its volume ID
// (fixed, mkfs.fat would derive it from the time), and the time its files
// carry (mtools reads SOURCE_DATE_EPOCH; FAT dates start in 1980).
const (
	diskLabel    = "CONVERGE"
	diskVolumeID = "434f4e56"  // "CONV"
	diskEpoch    = "315532800" // 1980-01-01T00:00:00Z
	mebibyte     = 1 << 20
	diskHeadroom = 4 // MiB over the files, for the FAT and ldlinux
)

// diskSizeMiB is the size of the FAT file system holding files of
// payload bytes.
func diskSizeMiB(payload int64) int64 { return (payload+mebibyte-1)/mebibyte + diskHeadroom }

// diskImage makes dir/disk.img, a raw image SeaBIOS boots by itself: a
// FAT16 "superfloppy" (no partition table; SeaBIOS loads sector 0, which
// is SYSLINUX's boot sector) holding /vmlinuz, /initrd.gz and
// /syslinux.cfg, with SYSLINUX installed (ldlinux.sys, ldlinux.c32).
// tools is the root the diskPackages were unpacked into. The image is
// reproducible: fixed volume ID, fixed file times, files in a fixed
// order.
func diskImage(tools, dir string, kernel, initrd []byte) (string, error) {
	files := filepath.Join(dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		return "", err
	}
	var names []string
	for _, f := range []struct {
		name string
		body []byte
	}{{"vmlinuz", kernel}, {"initrd.gz", initrd}, {"syslinux.cfg", syslinuxConfig}} {
		p := filepath.Join(files, f.name)
		if err := os.WriteFile(p, f.body, 0o644); err != nil {
			return "", err
		}
		names = append(names, p)
	}
	mtoolsrc := filepath.Join(dir, "mtoolsrc") // no /etc/mtools.conf of the host
	if err := os.WriteFile(mtoolsrc, nil, 0o644); err != nil {
		return "", err
	}
	// syslinux runs mcopy and mattrib through the shell: the unpacked
	// mtools come first in PATH.
	env := []string{
		"PATH=" + filepath.Join(tools, "usr", "bin") + ":" + os.Getenv("PATH"),
		"TZ=UTC", "SOURCE_DATE_EPOCH=" + diskEpoch, "MTOOLSRC=" + mtoolsrc, "MTOOLS_SKIP_CHECK=1",
	}
	img := filepath.Join(dir, "disk.img")
	kib := diskSizeMiB(int64(len(kernel)+len(initrd)+len(syslinuxConfig))) * 1024
	steps := [][]string{
		{filepath.Join(tools, "sbin", "mkfs.fat"), "-C", "--invariant", "-F", "16", "-i", diskVolumeID, "-n", diskLabel, img, strconv.FormatInt(kib, 10)},
		append(append([]string{filepath.Join(tools, "usr", "bin", "mcopy"), "-i", img}, names...), "::/"),
		{filepath.Join(tools, "usr", "bin", "syslinux"), "--install", img},
	}
	for _, s := range steps {
		if _, err := runEnv(dir, env, s[0], s[1:]...); err != nil {
			return "", fmt.Errorf("disk.img: %w", err)
		}
	}
	return img, nil
}

// qcow2 converts the raw image at img into a compressed qcow2 image next
// to it (qemu-img convert -O qcow2 -c) and gives its path.
func qcow2(img string) (string, error) {
	out := strings.TrimSuffix(img, filepath.Ext(img)) + ".qcow2"
	if _, err := run("", "qemu-img", "convert", "-f", "raw", "-O", "qcow2", "-c", img, out); err != nil {
		return "", fmt.Errorf("disk.qcow2: %w", err)
	}
	return out, nil
}

// qemuImgVersion gives the first line of qemu-img --version (in the
// stamp: the qcow2 image is its output).
func qemuImgVersion() (string, error) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		return "", fmt.Errorf("qemu-img makes disk.qcow2: %w (install qemu-utils)", err)
	}
	out, err := run("", "qemu-img", "--version")
	if err != nil {
		return "", err
	}
	first, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(first), nil
}
