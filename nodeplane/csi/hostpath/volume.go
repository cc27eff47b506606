package hostpath

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"time"
)

// Volume states recorded in volume.json.
const (
	stateCreating = "Creating"
	stateReady    = "Ready"
	stateDeleting = "Deleting"
)

// Access types recorded in volume.json.
const (
	accessMount = "mount"
	accessBlock = "block"
)

// volumeMeta is the content of <pool>/<id>/volume.json, the only record of a
// volume: the driver keeps no other state.
type volumeMeta struct {
	ID            string        `json:"id"`
	Pool          string        `json:"pool"`
	CapacityBytes int64         `json:"capacityBytes"`
	AccessType    string        `json:"accessType"`
	State         string        `json:"state"`
	Publications  []publication `json:"publications,omitempty"`
	// SourceVolumeID is, for a volume, the volume it was cloned from; for
	// a snapshot, the volume it was taken of.
	SourceVolumeID string `json:"sourceVolumeId,omitempty"`
	// SourceSnapshotID is the snapshot a volume was restored from.
	SourceSnapshotID string `json:"sourceSnapshotId,omitempty"`
	// CreationTime is when a snapshot was taken (UTC).
	CreationTime time.Time `json:"creationTime,omitzero"`
}

// publication is one NodePublishVolume in effect.
type publication struct {
	TargetPath string `json:"targetPath"`
	ReadOnly   bool   `json:"readOnly,omitempty"`
	AccessMode string `json:"accessMode"`
}

// ErrNotVolume marks an entry of a pool that exists but is not a volume of
// this driver (no or foreign metadata, a symlink, a file) or whose data is
// not what its metadata says; test with errors.Is.
var ErrNotVolume = errors.New("not a volume directory of this driver")

func (m *volumeMeta) publication(target string) (publication, bool) {
	i := slices.IndexFunc(m.Publications, func(p publication) bool { return p.TargetPath == target })
	if i < 0 {
		return publication{}, false
	}
	return m.Publications[i], true
}

func (m *volumeMeta) dataPath() string {
	if m.AccessType == accessBlock {
		return path.Join(m.ID, diskFile)
	}
	return path.Join(m.ID, dataDir)
}

// read loads the metadata of volume id (already validated). It returns an
// error wrapping fs.ErrNotExist when there is no entry id, and ErrNotVolume
// when the entry is not a real directory with this pool's volume.json.
func (p *pool) read(id string) (*volumeMeta, error) {
	st, err := p.root.Lstat(id)
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: %s %s: %w", p.Name, p.what(), id, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("storage pool %s: %s %s: %w (a %s)", p.Name, p.what(), id, ErrNotVolume, st.Mode().Type())
	}
	mp := path.Join(id, metaFile)
	mst, err := p.root.Lstat(mp)
	if err != nil || !mst.Mode().IsRegular() {
		return nil, fmt.Errorf("storage pool %s: %s %s: %w (no regular %s)", p.Name, p.what(), id, ErrNotVolume, metaFile)
	}
	b, err := p.root.ReadFile(mp)
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: %s %s: %w", p.Name, p.what(), id, err)
	}
	var m volumeMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("storage pool %s: %s %s: %s: %w (%v)", p.Name, p.what(), id, metaFile, ErrNotVolume, err)
	}
	if m.ID != id || m.Pool != p.Name {
		return nil, fmt.Errorf("storage pool %s: %s %s: %s names volume %q of pool %q: %w", p.Name, p.what(), id, metaFile, m.ID, m.Pool, ErrNotVolume)
	}
	return &m, nil
}

// write replaces volume.json of m.ID atomically (temporary file, fsync,
// rename).
func (p *pool) write(m *volumeMeta) error {
	if err := writeJSON(p.root, m.ID, metaFile, m); err != nil {
		return fmt.Errorf("storage pool %s: %s %s: writing %s: %w", p.Name, p.what(), m.ID, metaFile, err)
	}
	return nil
}

// list returns the Ready volumes of the pool, sorted by ID. Entries that are
// not volumes of this driver are skipped.
func (p *pool) list() ([]*volumeMeta, error) {
	d, err := p.root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: %w", p.Name, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: %w", p.Name, err)
	}
	slices.Sort(names)
	var out []*volumeMeta
	for _, n := range names {
		if ValidateVolumeID(n) != nil {
			continue
		}
		m, err := p.read(n)
		if err != nil || m.State != stateReady {
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

// what names the records of p in messages: "volume", or "snapshot" for a
// snapshot store.
func (p *pool) what() string {
	if p.kind == "" {
		return "volume"
	}
	return p.kind
}

// fillFunc writes the initial content of a new volume or snapshot into its
// data: the open, empty data directory (filesystem) or disk file opened
// read-write (block). A block fill may leave the file shorter than the
// capacity: finish extends it.
type fillFunc func(data *os.File) error

// create makes the directory, metadata and data of a new volume (empty, or
// written by fill when not nil): begin, fill, finish. m.State is Ready on
// success. A failure part-way leaves a Creating record that a retry or
// DeleteVolume cleans up.
func (p *pool) create(m *volumeMeta, fill fillFunc) error {
	if err := p.begin(m); err != nil {
		return err
	}
	if fill != nil {
		if err := p.fill(m, fill); err != nil {
			return err
		}
	}
	return p.finish(m)
}

// begin makes the directory of m with a Creating record and empty data (an
// empty disk file, or a world-writable data directory), replacing what an
// earlier failed attempt left.
func (p *pool) begin(m *volumeMeta) error {
	if err := p.root.Mkdir(m.ID, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("storage pool %s: %s %s: %w", p.Name, p.what(), m.ID, err)
	}
	m.State = stateCreating
	if err := p.write(m); err != nil {
		return err
	}
	if err := p.root.RemoveAll(m.dataPath()); err != nil {
		return fmt.Errorf("storage pool %s: %s %s: %w", p.Name, p.what(), m.ID, err)
	}
	if m.AccessType == accessBlock {
		f, err := p.root.OpenFile(m.dataPath(), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o660)
		if err != nil {
			return fmt.Errorf("storage pool %s: %s %s: %w", p.Name, p.what(), m.ID, err)
		}
		return f.Close()
	}
	if err := p.root.Mkdir(m.dataPath(), 0o777); err != nil {
		return fmt.Errorf("storage pool %s: %s %s: %w", p.Name, p.what(), m.ID, err)
	}
	// Pods run as any UID: the data directory is world-writable, as in
	// upstream hostpath drivers (the umask would otherwise narrow it).
	if err := p.root.Chmod(m.dataPath(), 0o777); err != nil {
		return fmt.Errorf("storage pool %s: %s %s: %w", p.Name, p.what(), m.ID, err)
	}
	return nil
}

// fill runs fill on the data begin made for m, opened through the root (a
// disk file read-write).
func (p *pool) fill(m *volumeMeta, fill fillFunc) error {
	f, err := p.openData(m, os.O_RDWR)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := fill(f); err != nil {
		return fmt.Errorf("storage pool %s: %s %s: %w", p.Name, p.what(), m.ID, err)
	}
	return nil
}

// finish sizes a block volume's disk file to its capacity (sparse) and
// records m as Ready.
func (p *pool) finish(m *volumeMeta) error {
	if m.AccessType == accessBlock {
		f, err := p.openData(m, os.O_RDWR)
		if err != nil {
			return err
		}
		err = f.Truncate(m.CapacityBytes)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("storage pool %s: %s %s: sizing %s to %d bytes: %w", p.Name, p.what(), m.ID, diskFile, m.CapacityBytes, err)
		}
	}
	m.State = stateReady
	return p.write(m)
}

// remove deletes volume m: it marks it Deleting, then removes its directory
// through the root (symlinks inside are removed, never followed).
func (p *pool) remove(m *volumeMeta) error {
	m.State = stateDeleting
	if err := p.write(m); err != nil {
		return err
	}
	if err := p.root.RemoveAll(m.ID); err != nil {
		return fmt.Errorf("storage pool %s: %s %s: %w", p.Name, p.what(), m.ID, err)
	}
	return nil
}

// openData opens the data of volume m (the data directory read-only, or the
// disk file with flag) through the root, refusing anything but a real
// directory or regular file of the volume (a symlink planted there is not
// followed), and checking that the opened inode is the one inspected.
func (p *pool) openData(m *volumeMeta, flag int) (*os.File, error) {
	dp := m.dataPath()
	st, err := p.root.Lstat(dp)
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: %s %s: %w", p.Name, p.what(), m.ID, err)
	}
	want := st.Mode().IsRegular()
	if m.AccessType == accessMount {
		want = st.IsDir()
		flag = os.O_RDONLY
	}
	if !want {
		return nil, fmt.Errorf("storage pool %s: %s %s: %s is a %v: %w", p.Name, p.what(), m.ID, dp, st.Mode().Type(), ErrNotVolume)
	}
	f, err := p.root.OpenFile(dp, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: %s %s: %w", p.Name, p.what(), m.ID, err)
	}
	if fst, err := f.Stat(); err != nil || !os.SameFile(st, fst) {
		f.Close()
		return nil, fmt.Errorf("storage pool %s: %s %s: %s changed while opening it", p.Name, p.what(), m.ID, dp)
	}
	return f, nil
}
