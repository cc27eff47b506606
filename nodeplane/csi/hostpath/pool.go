package hostpath

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// pool is an open storage pool: the os.Root every volume file is reached
// through, and the identity of the directory it was opened on.
type pool struct {
	Pool
	root *os.Root
	dir  os.FileInfo
}

// openPool creates p.Path if missing (mode 0750) and opens it as an os.Root.
func openPool(p Pool) (*pool, error) {
	if err := os.MkdirAll(p.Path, 0o750); err != nil {
		return nil, fmt.Errorf("storage pool %s: %w", p.Name, err)
	}
	root, err := os.OpenRoot(p.Path)
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: %w", p.Name, err)
	}
	dir, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("storage pool %s: %w", p.Name, err)
	}
	return &pool{Pool: p, root: root, dir: dir}, nil
}

// check returns an error when the pool's path no longer leads to the
// directory opened at start (moved, or replaced by a symlink or another
// directory): the driver then refuses to work on the pool rather than keep
// writing into a directory nobody will find again.
func (p *pool) check() error {
	st, err := os.Stat(p.Path)
	if err != nil {
		return fmt.Errorf("storage pool %s: %w", p.Name, err)
	}
	if !os.SameFile(st, p.dir) {
		return fmt.Errorf("storage pool %s: %s is no longer the directory opened at start (moved or replaced); restart the driver", p.Name, p.Path)
	}
	return nil
}

// space returns the pool filesystem's total and available bytes (statfs
// f_blocks and f_bavail times f_bsize).
func (p *pool) space() (total, avail int64, err error) {
	f, err := p.root.Open(".")
	if err != nil {
		return 0, 0, fmt.Errorf("storage pool %s: %w", p.Name, err)
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, 0, fmt.Errorf("storage pool %s: statfs: %w", p.Name, err)
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}

func (p *pool) close() error { return p.root.Close() }
