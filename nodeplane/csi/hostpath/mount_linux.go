package hostpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// bindMount bind-mounts the file or directory open as src onto target,
// through /proc/self/fd so the source is the inode opened (inside the pool)
// and not whatever its path leads to now; readOnly remounts it read-only.
func bindMount(src *os.File, target string, readOnly bool) error {
	source := "/proc/self/fd/" + strconv.Itoa(int(src.Fd()))
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", src.Name(), target, err)
	}
	if readOnly {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(target, 0)
			return fmt.Errorf("remount %s read-only: %w", target, err)
		}
	}
	return nil
}

// isMounted reports whether target is a mount point; a missing target is
// not.
func isMounted(target string) (bool, error) {
	ok, err := mountinfo.Mounted(target)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking mount point %s: %w", target, err)
	}
	return ok, nil
}

// unmountAll unmounts target until it is no longer a mount point (a target
// mounted twice by a crash between mount and record needs two).
func unmountAll(target string) error {
	for range 8 {
		ok, err := isMounted(target)
		if err != nil || !ok {
			return err
		}
		if err := unix.Unmount(target, 0); err != nil {
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 8 unmounts", target)
}
