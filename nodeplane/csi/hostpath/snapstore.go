package hostpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// snapshotsDir is the directory of a pool holding its snapshots. It starts
// with '.', so it can never be a volume ID (see ValidateVolumeID).
const snapshotsDir = ".snapshots"

// snapshots opens the snapshot store of p, the directory
// <pool>/.snapshots, as a pool of its own (kind "snapshot"): a snapshot
// <id> is the directory .snapshots/<id>, laid out like a volume directory
// (volume.json with the source volume and creation time, then data/ or
// disk.img). With create the directory is made when missing; without, a
// missing store gives an error wrapping fs.ErrNotExist. An entry
// .snapshots that is not a real directory (a planted symlink) gives an
// error wrapping ErrNotVolume: the store is never followed out of place.
// The caller closes the store (close).
func (p *pool) snapshots(create bool) (*pool, error) {
	st, err := p.root.Lstat(snapshotsDir)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err = p.root.Mkdir(snapshotsDir, 0o750); err == nil {
			st, err = p.root.Lstat(snapshotsDir)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: snapshot store: %w", p.Name, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("storage pool %s: snapshot store %s is a %v: %w", p.Name, snapshotsDir, st.Mode().Type(), ErrNotVolume)
	}
	root, err := p.root.OpenRoot(snapshotsDir)
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: snapshot store: %w", p.Name, err)
	}
	if rst, err := root.Stat("."); err != nil || !os.SameFile(st, rst) {
		root.Close()
		return nil, fmt.Errorf("storage pool %s: snapshot store %s changed while opening it", p.Name, snapshotsDir)
	}
	return &pool{Pool: p.Pool, root: root, dir: st, kind: "snapshot"}, nil
}

// removeSnapshotsIfEmpty removes p's snapshot store when it holds nothing,
// so a pool without snapshots is left as it was before the first one.
func (p *pool) removeSnapshotsIfEmpty() error {
	if st, err := p.root.Lstat(snapshotsDir); err != nil || !st.IsDir() {
		return nil // gone, or not ours to remove
	}
	err := p.root.Remove(snapshotsDir)
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	return fmt.Errorf("storage pool %s: removing empty snapshot store: %w", p.Name, err)
}

// snapshotRef is a snapshot found by lookupSnapshot: its pool, the open
// store (closed by close) and its record.
type snapshotRef struct {
	pool, store *pool
	meta        *volumeMeta
}

func (r *snapshotRef) close() {
	if r != nil && r.store != nil {
		r.store.close()
	}
}

// lookupSnapshot finds snapshot id (not yet validated) in the pools' stores.
// It gives InvalidArgument for a malformed ID, FailedPrecondition when a
// pool's directory was replaced or its .snapshots is not a real directory,
// NotFound when no store holds a snapshot id. The caller holds the lock and
// closes the answer.
func (d *Driver) lookupSnapshot(id string) (*snapshotRef, error) {
	if err := ValidateSnapshotID(id); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	for _, p := range d.pools {
		if !p.mounted() {
			continue
		}
		if err := p.check(); err != nil {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		sp, err := p.snapshots(false)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case errors.Is(err, ErrNotVolume):
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		case err != nil:
			return nil, status.Error(codes.Internal, err.Error())
		}
		m, err := sp.read(id)
		switch {
		case err == nil:
			return &snapshotRef{pool: p, store: sp, meta: m}, nil
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, ErrNotVolume):
			sp.close()
			continue
		default:
			sp.close()
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return nil, status.Errorf(codes.NotFound, "snapshot %s: not found in storage pools %s", id, d.poolNames())
}

// lookupReadySnapshot is lookupSnapshot for snapshots in use: one still
// being taken or deleted is NotFound.
func (d *Driver) lookupReadySnapshot(id string) (*snapshotRef, error) {
	r, err := d.lookupSnapshot(id)
	if err == nil && r.meta.State != stateReady {
		r.close()
		return nil, status.Errorf(codes.NotFound, "snapshot %s: in pool %s but %s", id, r.pool.Name, r.meta.State)
	}
	return r, err
}
