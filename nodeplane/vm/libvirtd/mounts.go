package libvirtd

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// bind is one bind mount of the daemons' mount namespace: Source is
// mounted over Target, a libvirt directory (or qemu.conf).
type bind struct {
	Source, Target string
	File           bool // a file, not a directory
}

// binds gives the bind mounts that make libvirt's compiled-in
// directories o's, in the order they are made (see the package doc).
func binds(o Options) []bind {
	var b []bind
	if !sameDir(o.SocketDir, libvirtRunDir) {
		b = append(b, bind{Source: o.SocketDir, Target: libvirtRunDir})
	}
	if !sameDir(o.StateDir, libvirtStateDir) {
		b = append(b, bind{Source: o.StateDir, Target: libvirtStateDir})
	}
	b = append(b,
		bind{Source: confDir(o), Target: libvirtConfDir},
		bind{Source: filepath.Join(o.RunDir, "qemu.conf"), Target: filepath.Join(libvirtConfDir, "qemu.conf"), File: true},
	)
	if !sameDir(o.LogDir, libvirtLogDir) {
		b = append(b, bind{Source: o.LogDir, Target: libvirtLogDir})
	}
	return b
}

// confDir is the daemons' /etc/libvirt: StateDir/etc.
func confDir(o Options) string { return filepath.Join(o.StateDir, "etc") }

// prepareDirs creates o's directories, the mount targets on the host
// (libvirt's directories, when absent) and the file qemu.conf is mounted
// over, and writes the configuration.
func prepareDirs(o Options) error {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{o.RunDir, 0o755}, {o.SocketDir, 0o755}, {o.StateDir, 0o755}, {confDir(o), 0o755}, {o.LogDir, 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return fmt.Errorf("creating %s: %w", d.path, err)
		}
	}
	if err := writeConfig(o); err != nil {
		return err
	}
	placeholder := filepath.Join(confDir(o), "qemu.conf")
	if _, err := os.Lstat(placeholder); os.IsNotExist(err) {
		msg := "# converge-node libvirtd mounts its own qemu.conf (from its run directory) over this file.\n"
		if err := os.WriteFile(placeholder, []byte(msg), 0o644); err != nil {
			return fmt.Errorf("creating %s: %w", placeholder, err)
		}
	}
	for _, b := range binds(o) {
		if b.File {
			continue // inside confDir, created above
		}
		if err := os.MkdirAll(b.Target, 0o755); err != nil {
			return fmt.Errorf("creating the mount point %s: %w", b.Target, err)
		}
	}
	return nil
}

// enterNamespaces moves the calling thread, which must be locked to its
// goroutine and never unlocked (it is not reusable afterwards), into a new
// mount namespace whose mounts do not propagate back (slave of the
// caller's), joins netns when set (remounting /sys for it, as `ip netns
// exec` does), and makes the bind mounts of o. Children started from the
// thread inherit all of it.
func enterNamespaces(o Options) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWNS): %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("making / a slave mount: %w", err)
	}
	if o.Netns != "" {
		fd, err := unix.Open(o.Netns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("network namespace %s: %w", o.Netns, err)
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("network namespace %s: setns: %w", o.Netns, err)
		}
		if err := unix.Unmount("/sys", unix.MNT_DETACH); err != nil {
			return fmt.Errorf("network namespace %s: unmounting /sys: %w", o.Netns, err)
		}
		if err := unix.Mount(o.Netns, "/sys", "sysfs", 0, ""); err != nil {
			return fmt.Errorf("network namespace %s: mounting sysfs: %w", o.Netns, err)
		}
	}
	// Every source is opened before the first mount, so that a source
	// under a directory mounted over (a run directory under /run/libvirt)
	// is still the caller's.
	bs := binds(o)
	fds := make([]int, len(bs))
	for i, b := range bs {
		fd, err := unix.Open(b.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, f := range fds[:i] {
				unix.Close(f)
			}
			return fmt.Errorf("opening %s: %w", b.Source, err)
		}
		fds[i] = fd
	}
	defer func() {
		for _, f := range fds {
			unix.Close(f)
		}
	}()
	for i, b := range bs {
		flags := uintptr(unix.MS_BIND)
		if !b.File {
			flags |= unix.MS_REC
		}
		src := fmt.Sprintf("/proc/self/fd/%d", fds[i])
		if err := unix.Mount(src, b.Target, "", flags, ""); err != nil {
			return fmt.Errorf("bind-mounting %s over %s: %w", b.Source, b.Target, err)
		}
	}
	return nil
}
