package hostpath

import (
	"errors"
	"fmt"
	"os"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errNotMounted is wrapped by a Mounted pool's check while its path is
// not a mount point yet: the pool holds no volume and takes none.
var errNotMounted = errors.New("not mounted yet")

// pool is an open storage pool: the os.Root every volume file is reached
// through, and the identity of the directory it was opened on.
type pool struct {
	Pool
	root *os.Root
	dir  os.FileInfo
	// kind is "" for a pool, "snapshot" for the snapshot store of a pool
	// (see snapshots).
	kind string
}

// openPool creates p.Path if missing (mode 0750) and opens it as an os.Root.
// A Mounted pool whose path is not a mount point yet is left closed and
// nothing is created there: check opens it once it is mounted.
func openPool(p Pool) (*pool, error) {
	if p.Mounted {
		if ok, err := mountinfo.Mounted(p.Path); err != nil || !ok {
			return &pool{Pool: p}, nil
		}
	}
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
//
// A Mounted pool not opened yet is opened here once its path is a mount
// point; before, check gives an error wrapping errNotMounted. Callers hold
// the driver's lock.
func (p *pool) check() error {
	if p.root == nil {
		if ok, err := mountinfo.Mounted(p.Path); err != nil || !ok {
			return fmt.Errorf("storage pool %s: %s is %w (its storage pool worker mounts it)", p.Name, p.Path, errNotMounted)
		}
		op, err := openPool(p.Pool)
		if err != nil {
			return err
		}
		p.root, p.dir = op.root, op.dir
	}
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

func (p *pool) close() error {
	if p.root == nil {
		return nil
	}
	return p.root.Close()
}

// mounted reports whether p is open: always, except a Mounted pool whose
// mount has not come yet.
func (p *pool) mounted() bool { return p.root != nil || p.check() == nil }

// checkStatus gives the gRPC status of a check error: Unavailable while a
// Mounted pool waits for its mount (the caller retries), else
// FailedPrecondition.
func checkStatus(err error) error {
	if errors.Is(err, errNotMounted) {
		return status.Error(codes.Unavailable, err.Error())
	}
	return status.Error(codes.FailedPrecondition, err.Error())
}
