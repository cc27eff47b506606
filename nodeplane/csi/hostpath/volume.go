package hostpath

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
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
		return nil, fmt.Errorf("storage pool %s: volume %s: %w", p.Name, id, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("storage pool %s: volume %s: %w (a %s)", p.Name, id, ErrNotVolume, st.Mode().Type())
	}
	mp := path.Join(id, metaFile)
	mst, err := p.root.Lstat(mp)
	if err != nil || !mst.Mode().IsRegular() {
		return nil, fmt.Errorf("storage pool %s: volume %s: %w (no regular %s)", p.Name, id, ErrNotVolume, metaFile)
	}
	b, err := p.root.ReadFile(mp)
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: volume %s: %w", p.Name, id, err)
	}
	var m volumeMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("storage pool %s: volume %s: %s: %w (%v)", p.Name, id, metaFile, ErrNotVolume, err)
	}
	if m.ID != id || m.Pool != p.Name {
		return nil, fmt.Errorf("storage pool %s: volume %s: %s names volume %q of pool %q: %w", p.Name, id, metaFile, m.ID, m.Pool, ErrNotVolume)
	}
	return &m, nil
}

// write replaces volume.json of m.ID atomically (temporary file, fsync,
// rename).
func (p *pool) write(m *volumeMeta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := path.Join(m.ID, "."+metaFile+".tmp")
	f, err := p.root.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("storage pool %s: volume %s: %w", p.Name, m.ID, err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = p.root.Rename(tmp, path.Join(m.ID, metaFile))
	}
	if err != nil {
		return fmt.Errorf("storage pool %s: volume %s: writing %s: %w", p.Name, m.ID, metaFile, err)
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

// create makes the directory, metadata and data of a new volume; m.State is
// set to Ready on success. A failure part-way leaves a Creating record that
// a retry or DeleteVolume cleans up.
func (p *pool) create(m *volumeMeta) error {
	if err := p.root.Mkdir(m.ID, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("storage pool %s: volume %s: %w", p.Name, m.ID, err)
	}
	m.State = stateCreating
	if err := p.write(m); err != nil {
		return err
	}
	if err := p.root.RemoveAll(m.dataPath()); err != nil {
		return fmt.Errorf("storage pool %s: volume %s: %w", p.Name, m.ID, err)
	}
	if m.AccessType == accessBlock {
		f, err := p.root.OpenFile(m.dataPath(), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o660)
		if err != nil {
			return fmt.Errorf("storage pool %s: volume %s: %w", p.Name, m.ID, err)
		}
		err = f.Truncate(m.CapacityBytes)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("storage pool %s: volume %s: sizing %s to %d bytes: %w", p.Name, m.ID, diskFile, m.CapacityBytes, err)
		}
	} else {
		if err := p.root.Mkdir(m.dataPath(), 0o777); err != nil {
			return fmt.Errorf("storage pool %s: volume %s: %w", p.Name, m.ID, err)
		}
		// Pods run as any UID: the data directory is world-writable, as in
		// upstream hostpath drivers (the umask would otherwise narrow it).
		if err := p.root.Chmod(m.dataPath(), 0o777); err != nil {
			return fmt.Errorf("storage pool %s: volume %s: %w", p.Name, m.ID, err)
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
		return fmt.Errorf("storage pool %s: volume %s: %w", p.Name, m.ID, err)
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
		return nil, fmt.Errorf("storage pool %s: volume %s: %w", p.Name, m.ID, err)
	}
	want := st.Mode().IsRegular()
	if m.AccessType == accessMount {
		want = st.IsDir()
		flag = os.O_RDONLY
	}
	if !want {
		return nil, fmt.Errorf("storage pool %s: volume %s: %s is a %v: %w", p.Name, m.ID, dp, st.Mode().Type(), ErrNotVolume)
	}
	f, err := p.root.OpenFile(dp, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: volume %s: %w", p.Name, m.ID, err)
	}
	if fst, err := f.Stat(); err != nil || !os.SameFile(st, fst) {
		f.Close()
		return nil, fmt.Errorf("storage pool %s: volume %s: %s changed while opening it", p.Name, m.ID, dp)
	}
	return f, nil
}
