//go:build linux

// Package loopdev attaches regular files to Linux loop block devices and
// detaches them, with the loop ioctls of golang.org/x/sys/unix (the
// operations of util-linux losetup -f --show, losetup -j and losetup -d,
// without running the binary). It needs CAP_SYS_ADMIN and /dev/loop-control.
//
// Devices are attached without LO_FLAGS_AUTOCLEAR: an attached device stays
// attached after the caller closes its descriptors, until Detach. Callers
// find the devices of a file again with Find, so no in-memory state is
// needed across restarts.
package loopdev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// controlPath is the loop control device of the kernel.
const controlPath = "/dev/loop-control"

// attachRetries bounds the retries of Attach when another process takes the
// free device between LOOP_CTL_GET_FREE and LOOP_CONFIGURE (EBUSY).
const attachRetries = 8

// Attach binds backing (a regular file opened read-write, or read-only when
// readOnly is true) to a free loop device and returns the device path, e.g.
// "/dev/loop3". The backing descriptor may be closed afterwards. Errors name
// the backing file and the device.
func Attach(backing *os.File, readOnly bool) (string, error) {
	ctl, err := os.OpenFile(controlPath, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("attach %s: %w", backing.Name(), err)
	}
	defer ctl.Close()
	var lastErr error
	for range attachRetries {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("attach %s: %s: LOOP_CTL_GET_FREE: %w", backing.Name(), controlPath, err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		err = configure(dev, backing, readOnly)
		if err == nil {
			return dev, nil
		}
		lastErr = err
		if !errors.Is(err, unix.EBUSY) {
			break
		}
	}
	return "", fmt.Errorf("attach %s: %w", backing.Name(), lastErr)
}

func configure(dev string, backing *os.File, readOnly bool) error {
	flag := os.O_RDWR
	var loFlags uint32
	if readOnly {
		flag = os.O_RDONLY
		loFlags = unix.LO_FLAGS_READ_ONLY
	}
	f, err := os.OpenFile(dev, flag, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", dev, err)
	}
	defer f.Close()
	cfg := unix.LoopConfig{Fd: uint32(backing.Fd())}
	cfg.Info.Flags = loFlags
	name := backing.Name()
	if len(name) >= len(cfg.Info.File_name) {
		name = name[len(name)-len(cfg.Info.File_name)+1:]
	}
	copy(cfg.Info.File_name[:], name)
	if err := unix.IoctlLoopConfigure(int(f.Fd()), &cfg); err != nil {
		return fmt.Errorf("%s: LOOP_CONFIGURE: %w", dev, err)
	}
	return nil
}

// Find returns the loop devices (sorted by number) whose backing file is the
// inode of backing, compared by device and inode number, so renames and
// symlinks do not matter. Devices that cannot be opened are skipped.
func Find(backing *os.File) ([]string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(backing.Fd()), &st); err != nil {
		return nil, fmt.Errorf("find loop devices of %s: %w", backing.Name(), err)
	}
	devs, err := filepath.Glob("/sys/block/loop*")
	if err != nil {
		return nil, err
	}
	var out []string
	nums := make([]int, 0, len(devs))
	for _, d := range devs {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "loop"))
		if err == nil {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	for _, n := range nums {
		dev := "/dev/loop" + strconv.Itoa(n)
		if _, err := os.Stat(filepath.Join("/sys/block", "loop"+strconv.Itoa(n), "loop", "backing_file")); err != nil {
			continue // not bound
		}
		info, err := status(dev)
		if err != nil {
			continue
		}
		if info.Inode == st.Ino && info.Device == uint64(st.Dev) {
			out = append(out, dev)
		}
	}
	return out, nil
}

func status(dev string) (*unix.LoopInfo64, error) {
	f, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return unix.IoctlLoopGetStatus64(int(f.Fd()))
}

// Detach unbinds dev (a path such as "/dev/loop3") from its backing file.
// Detaching an unbound device (ENXIO) is not an error.
func Detach(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("detach %s: %w", dev, err)
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, syscall.ENXIO) {
		return fmt.Errorf("detach %s: LOOP_CLR_FD: %w", dev, err)
	}
	return nil
}
