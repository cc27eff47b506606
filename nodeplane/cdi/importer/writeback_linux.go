package importer

import (
	"os"

	"golang.org/x/sys/unix"
)

// fileWriteback queues the writeback of all of f's dirty pages not
// already under writeback, without waiting for it (sync_file_range(2)
// with SYNC_FILE_RANGE_WRITE; offset 0 and length 0 cover the file).
func fileWriteback(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SyncFileRange(int(fd), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	}); err != nil {
		return err
	}
	return serr
}
