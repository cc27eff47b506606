package hostpath

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// maxTreeDepth bounds the directory nesting copyTree follows (each level
// holds two descriptors open); a deeper tree is an error, not a partial copy.
const maxTreeDepth = 256

// copyStats counts what copyTree did.
type copyStats struct {
	Reflinked, Copied int // regular files shared by FICLONE, copied by data
	Skipped           int // sockets: not copied
}

// copyTree copies the contents of the directory src into the empty
// directory dst (both open descriptors) and then gives dst src's owner,
// mode and times. The tree of src is untrusted (a pod writes it): every
// entry is reached relative to its parent's descriptor with O_NOFOLLOW, so
// a symlink is copied as a symlink with the same target and never
// followed, and a directory swapped for a symlink meanwhile fails the copy
// instead of leading out of the volume. Regular files go through copyFile
// (reflink, else sparse copy); directories, symlinks, FIFOs and device
// nodes are recreated with their owner, mode and times; sockets are
// skipped; hard links become separate files; extended attributes are not
// copied. Errors name the entry.
func copyTree(dst, src *os.File) (copyStats, error) {
	var s copyStats
	if err := copyDir(dst, src, 0, &s); err != nil {
		return s, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return s, fmt.Errorf("copy %s: %w", src.Name(), err)
	}
	fd := int(dst.Fd())
	if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
		return s, fmt.Errorf("copy %s: chown: %w", dst.Name(), err)
	}
	if err := unix.Fchmod(fd, st.Mode&0o7777); err != nil {
		return s, fmt.Errorf("copy %s: chmod: %w", dst.Name(), err)
	}
	tv := []unix.Timeval{unix.NsecToTimeval(unix.TimespecToNsec(st.Atim)), unix.NsecToTimeval(unix.TimespecToNsec(st.Mtim))}
	if err := unix.Futimes(fd, tv); err != nil {
		return s, fmt.Errorf("copy %s: times: %w", dst.Name(), err)
	}
	return s, nil
}

// openAt opens name relative to dir without following a final symlink.
func openAt(dir *os.File, name string, flag int, mode uint32) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return nil, fmt.Errorf("open %s/%s: %w", dir.Name(), name, err)
	}
	return os.NewFile(uintptr(fd), dir.Name()+"/"+name), nil
}

func copyDir(dst, src *os.File, depth int, s *copyStats) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("copy %s: directories nested deeper than %d levels", src.Name(), maxTreeDepth)
	}
	names, err := src.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src.Name(), err)
	}
	for _, name := range names {
		if err := copyEntry(dst, src, name, depth, s); err != nil {
			return err
		}
	}
	return nil
}

// copyEntry copies src/name to dst/name (see copyTree).
func copyEntry(dst, src *os.File, name string, depth int, s *copyStats) error {
	sfd, dfd := int(src.Fd()), int(dst.Fd())
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("copy %s/%s: %w", src.Name(), name, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
			return fmt.Errorf("copy %s/%s: %w", dst.Name(), name, err)
		}
		sd, err := openAt(src, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		defer sd.Close()
		dd, err := openAt(dst, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		defer dd.Close()
		if err := copyDir(dd, sd, depth+1, s); err != nil {
			return err
		}
	case unix.S_IFREG:
		sf, err := openAt(src, name, unix.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer sf.Close()
		if fst, err := sf.Stat(); err != nil || !fst.Mode().IsRegular() {
			return fmt.Errorf("copy %s/%s: changed while copying", src.Name(), name)
		}
		df, err := openAt(dst, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		defer df.Close()
		m, err := copyFile(df, sf)
		if err != nil {
			return err
		}
		if m == copyReflink {
			s.Reflinked++
		} else {
			s.Copied++
		}
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(sfd, name, buf)
		if err != nil {
			return fmt.Errorf("copy %s/%s: %w", src.Name(), name, err)
		}
		if err := unix.Symlinkat(string(buf[:n]), dfd, name); err != nil {
			return fmt.Errorf("copy %s/%s: %w", dst.Name(), name, err)
		}
		return setAttrs(dst, name, &st, true)
	case unix.S_IFIFO, unix.S_IFCHR, unix.S_IFBLK:
		if err := unix.Mknodat(dfd, name, st.Mode, int(st.Rdev)); err != nil {
			return fmt.Errorf("copy %s/%s: %w", dst.Name(), name, err)
		}
	default: // sockets: meaningless without their process
		s.Skipped++
		return nil
	}
	return setAttrs(dst, name, &st, false)
}

// setAttrs gives dir/name the owner, mode (not for a symlink) and times of
// st, never following a symlink.
func setAttrs(dir *os.File, name string, st *unix.Stat_t, symlink bool) error {
	fd := int(dir.Fd())
	if err := unix.Fchownat(fd, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("copy %s/%s: chown: %w", dir.Name(), name, err)
	}
	if !symlink {
		if err := unix.Fchmodat(fd, name, st.Mode&0o7777, 0); err != nil {
			return fmt.Errorf("copy %s/%s: chmod: %w", dir.Name(), name, err)
		}
	}
	if err := unix.UtimesNanoAt(fd, name, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("copy %s/%s: times: %w", dir.Name(), name, err)
	}
	return nil
}
