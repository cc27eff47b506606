package hostpath

import (
	"fmt"
	"os"
	"path/filepath"
)

// VolumeData is where the data of one Ready volume lives on this node, as
// the driver lays it out (see the package comment).
type VolumeData struct {
	// Path is the absolute path of the data: the directory
	// <pool>/<id>/data of a filesystem volume, or the sparse file
	// <pool>/<id>/disk.img backing a block volume.
	Path string
	// Block is true for a block volume (Path is a regular file).
	Block bool
	// CapacityBytes is the capacity recorded at CreateVolume.
	CapacityBytes int64
}

// LookupVolume resolves volume id of pool p for another process on the
// node (the cdi-importer fills volumes the driver created) with the
// driver's own checks: id must pass ValidateVolumeID; the pool is opened
// as an os.Root (never created) and the volume is reached only through
// it; <pool>/<id> must be a real directory with this pool's volume.json
// for id in state Ready; and the data must be a real directory
// (filesystem) or regular file (block), not a symlink. It gives the
// data's absolute path, access type and capacity.
//
// Errors name the pool and volume. A missing volume wraps fs.ErrNotExist;
// an entry that is not a Ready volume of this driver, or whose data was
// replaced, wraps ErrNotVolume. The answer holds at the time of the call:
// a caller opening Path should still refuse symlinks (O_NOFOLLOW).
func LookupVolume(p Pool, id string) (VolumeData, error) {
	if err := ValidateVolumeID(id); err != nil {
		return VolumeData{}, fmt.Errorf("storage pool %s: %w", p.Name, err)
	}
	root, err := os.OpenRoot(p.Path)
	if err != nil {
		return VolumeData{}, fmt.Errorf("storage pool %s: %w", p.Name, err)
	}
	defer root.Close()
	pl := &pool{Pool: p, root: root}
	m, err := pl.read(id)
	if err != nil {
		return VolumeData{}, err
	}
	if m.State != stateReady {
		return VolumeData{}, fmt.Errorf("storage pool %s: volume %s is %s, expected Ready: %w", p.Name, id, m.State, ErrNotVolume)
	}
	f, err := pl.openData(m, os.O_RDONLY)
	if err != nil {
		return VolumeData{}, err
	}
	f.Close()
	return VolumeData{
		Path:          filepath.Join(p.Path, filepath.FromSlash(m.dataPath())),
		Block:         m.AccessType == accessBlock,
		CapacityBytes: m.CapacityBytes,
	}, nil
}
