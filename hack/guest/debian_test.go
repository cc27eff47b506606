package main

import (
	"strings"
	"testing"
)

// TestDebianRecipe: the pieces of the Debian disk that must agree do — the
// boot entry's root label is the one fstab mounts (and mkfs.ext4 -L
// gives), the console is the serial port KubeVirt's console reads, the
// kernel and initrd are the ones given — and the stamp follows every
// written file and package.
func TestDebianRecipe(t *testing.T) {
	conf := extlinuxConfig("/boot/vmlinuz-6.1.0-1-cloud-amd64", "/boot/initrd.img-6.1.0-1-cloud-amd64")
	for _, want := range []string{"root=LABEL=root ", "console=ttyS0", "LINUX /boot/vmlinuz-6.1.0-1-cloud-amd64\n", "INITRD /boot/initrd.img-6.1.0-1-cloud-amd64\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("extlinux.conf lacks %q:\n%s", want, conf)
		}
	}
	if fstab := debianFiles()["etc/fstab"]; !strings.HasPrefix(fstab, "LABEL=root / ") {
		t.Errorf("fstab %q does not mount the file system labelled root at /", fstab)
	}
	st := debianStamp()
	for _, p := range append([]string{"etc/fstab=", "etc/cloud/cloud.cfg.d/90-converge.cfg=", "extlinux.conf="}, debianPackages...) {
		if !strings.Contains(st, p) {
			t.Errorf("stamp lacks %q:\n%s", p, st)
		}
	}
}
