package hostpath

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// copyMethod says how copyFile copied a file.
type copyMethod int

const (
	copyReflink copyMethod = iota // FICLONE: extents shared, copy-on-write
	copySparse                    // SEEK_DATA/SEEK_HOLE: only data ranges copied, holes kept
)

func (m copyMethod) String() string {
	if m == copyReflink {
		return "reflink"
	}
	return "sparse copy"
}

// copyFile makes dst (an empty regular file open for writing) a copy of
// src (a regular file open for reading) of src's size. It first asks the
// filesystem to share src's extents with dst (the FICLONE ioctl: btrfs,
// XFS with reflink, bcachefs, OCFS2 ...): constant time, no data
// duplicated. Where that is refused (another filesystem, or src and dst on
// two filesystems) it copies the data ranges only (copySparse): holes stay
// holes. It returns the method used; errors name the files.
func copyFile(dst, src *os.File) (copyMethod, error) {
	err := unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
	if err == nil {
		return copyReflink, nil
	}
	if !reflinkUnsupported(err) {
		return 0, fmt.Errorf("reflink %s to %s: %w", src.Name(), dst.Name(), err)
	}
	return copySparse, sparseCopy(dst, src)
}

// reflinkUnsupported reports whether a FICLONE error means "not here" (so a
// data copy is the answer) rather than a failure of the files themselves.
func reflinkUnsupported(err error) bool {
	for _, e := range []error{unix.EOPNOTSUPP, unix.ENOTSUP, unix.EXDEV, unix.EINVAL, unix.ENOTTY, unix.ENOSYS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sparseCopy copies the data ranges of src (found with lseek SEEK_DATA and
// SEEK_HOLE) to the same offsets of dst with copy_file_range (read/write
// when the kernel refuses it), then sets dst's size to src's: holes of src
// are holes of dst. Filesystems without SEEK_DATA report the whole file as
// data, which is then copied in full.
func sparseCopy(dst, src *os.File) error {
	st, err := src.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	sfd := int(src.Fd())
	for off := int64(0); off < size; {
		start, err := unix.Seek(sfd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data after off
		}
		if err != nil {
			return fmt.Errorf("sparse copy of %s: SEEK_DATA at %d: %w", src.Name(), off, err)
		}
		end, err := unix.Seek(sfd, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("sparse copy of %s: SEEK_HOLE at %d: %w", src.Name(), start, err)
		}
		end = min(end, size)
		if err := copyRange(dst, src, start, end-start); err != nil {
			return fmt.Errorf("sparse copy of %s to %s at %d: %w", src.Name(), dst.Name(), start, err)
		}
		off = end
	}
	if err := dst.Truncate(size); err != nil {
		return fmt.Errorf("sparse copy to %s: sizing to %d bytes: %w", dst.Name(), size, err)
	}
	return nil
}

// copyRange copies n bytes at offset off of src to the same offset of dst.
func copyRange(dst, src *os.File, off, n int64) error {
	roff, woff := off, off
	for n > 0 {
		c, err := unix.CopyFileRange(int(src.Fd()), &roff, int(dst.Fd()), &woff, int(min(n, 1<<30)), 0)
		if err != nil {
			if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
				return copyRangeRW(dst, src, roff, n)
			}
			return err
		}
		if c == 0 {
			return fmt.Errorf("copy_file_range: source ended at %d, %d bytes short", roff, n)
		}
		n -= int64(c)
	}
	return nil
}

// copyRangeRW is copyRange through a user-space buffer.
func copyRangeRW(dst, src *os.File, off, n int64) error {
	w := io.NewOffsetWriter(dst, off)
	got, err := io.Copy(w, io.NewSectionReader(src, off, n))
	if err == nil && got != n {
		err = fmt.Errorf("source ended at %d, %d bytes short", off+got, n-got)
	}
	return err
}
