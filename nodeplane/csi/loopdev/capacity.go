//go:build linux

package loopdev

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SetCapacity makes dev (a path such as "/dev/loop3") take the current size
// of its backing file (LOOP_SET_CAPACITY, losetup -c), after the file was
// grown while attached. It returns the device's new size in bytes. Errors
// name the device.
func SetCapacity(dev string) (int64, error) {
	f, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("set capacity of %s: %w", dev, err)
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_SET_CAPACITY, 0); err != nil {
		return 0, fmt.Errorf("set capacity of %s: LOOP_SET_CAPACITY: %w", dev, err)
	}
	n, err := Size(f)
	if err != nil {
		return 0, fmt.Errorf("set capacity of %s: %w", dev, err)
	}
	return n, nil
}

// Size returns the size in bytes of the block device open as f
// (BLKGETSIZE64). Errors are the ioctl's.
func Size(f *os.File) (int64, error) {
	var n uint64
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&n))); errno != 0 {
		return 0, fmt.Errorf("BLKGETSIZE64 on %s: %w", f.Name(), errno)
	}
	return int64(n), nil
}
