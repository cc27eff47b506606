package libvirtd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
)

// Check verifies what the daemons need before anything starts, and gives
// every problem found, each saying what to install or add: root (libvirtd
// runs privileged), the libvirtd and virtlogd binaries of o, and the user
// QEMUUser, which libvirtd resolves at start even though QEMU runs as
// root (Debian's libvirt-daemon creates it in a maintainer script, which
// an image built from unpacked packages does not run).
func Check(o Options) error {
	var errs []error
	if os.Geteuid() != 0 {
		errs = append(errs, fmt.Errorf("libvirtd runs privileged: run as root (euid %d)", os.Geteuid()))
	}
	for _, b := range []struct{ bin, pkg string }{{o.Libvirtd, "libvirt-daemon libvirt-daemon-driver-qemu"}, {o.Virtlogd, "libvirt-daemon"}} {
		if _, err := exec.LookPath(b.bin); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w (Debian packages %s)", b.bin, err, b.pkg))
		}
	}
	if _, err := user.Lookup(QEMUUser); err != nil {
		errs = append(errs, fmt.Errorf("user %s: %w: libvirtd refuses to start without it, even though QEMU runs as root; add it to /etc/passwd and /etc/group (groupadd -r %[1]s && useradd -r -g %[1]s -d /var/lib/libvirt -s /usr/sbin/nologin %[1]s)", QEMUUser, err))
	}
	return errors.Join(errs...)
}
