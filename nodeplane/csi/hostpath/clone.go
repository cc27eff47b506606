package hostpath

import (
	"errors"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// contentSource is the parsed VolumeContentSource of a CreateVolume: at
// most one of a volume (clone) and a snapshot (restore).
type contentSource struct {
	volumeID, snapshotID string
}

// parseContentSource checks cs: nil is no source; otherwise exactly one
// of volume and snapshot with a non-empty ID (InvalidArgument if not).
func parseContentSource(cs *csi.VolumeContentSource) (contentSource, error) {
	switch {
	case cs == nil:
		return contentSource{}, nil
	case cs.GetVolume() != nil:
		if cs.GetVolume().GetVolumeId() == "" {
			return contentSource{}, status.Error(codes.InvalidArgument, "volume_content_source.volume.volume_id: required")
		}
		return contentSource{volumeID: cs.GetVolume().GetVolumeId()}, nil
	case cs.GetSnapshot() != nil:
		if cs.GetSnapshot().GetSnapshotId() == "" {
			return contentSource{}, status.Error(codes.InvalidArgument, "volume_content_source.snapshot.snapshot_id: required")
		}
		return contentSource{snapshotID: cs.GetSnapshot().GetSnapshotId()}, nil
	}
	return contentSource{}, status.Error(codes.InvalidArgument, "volume_content_source: volume or snapshot required")
}

// matches reports whether volume m was created from this source.
func (c contentSource) matches(m *volumeMeta) bool {
	return m.SourceVolumeID == c.volumeID && m.SourceSnapshotID == c.snapshotID
}

// String names the source for messages: "volume <id>", "snapshot <id>" or
// "none".
func (c contentSource) String() string {
	switch {
	case c.volumeID != "":
		return "volume " + c.volumeID
	case c.snapshotID != "":
		return "snapshot " + c.snapshotID
	}
	return "none"
}

// key is the pending key of the source (see checkPending), "" for none.
func (c contentSource) key() string {
	switch {
	case c.volumeID != "":
		return volumeKey(c.volumeID)
	case c.snapshotID != "":
		return snapshotKey(c.snapshotID)
	}
	return ""
}

// csi is the VolumeContentSource of c for a response, nil for no source.
func (c contentSource) csi() *csi.VolumeContentSource {
	switch {
	case c.volumeID != "":
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: c.volumeID}}}
	case c.snapshotID != "":
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: c.snapshotID}}}
	}
	return nil
}

// resolvedSource is a content source found in the pools: the pool (or
// snapshot store) holding it and its record; release closes a store.
type resolvedSource struct {
	pool    *pool
	meta    *volumeMeta
	release func()
}

// resolve finds the Ready volume or snapshot c names: NotFound when there
// is none, InvalidArgument for a malformed ID. The caller holds the lock
// and calls release.
func (d *Driver) resolve(c contentSource) (*resolvedSource, error) {
	if c.volumeID != "" {
		p, m, err := d.lookupReady(c.volumeID)
		if err != nil {
			return nil, err
		}
		return &resolvedSource{pool: p, meta: m, release: func() {}}, nil
	}
	r, err := d.lookupReadySnapshot(c.snapshotID)
	if err != nil {
		return nil, err
	}
	return &resolvedSource{pool: r.store, meta: r.meta, release: r.close}, nil
}

// cloneSize is the size of a volume created from a source of srcSize
// bytes: the source's size without a capacity range, else volumeSize(r),
// which must not be below the source's (OutOfRange).
func cloneSize(r *csi.CapacityRange, srcSize int64) (int64, error) {
	if r.GetRequiredBytes() == 0 && r.GetLimitBytes() == 0 {
		return srcSize, nil
	}
	size, err := volumeSize(r)
	if err != nil {
		return 0, err
	}
	if size < srcSize {
		if lim := r.GetLimitBytes(); lim == 0 || lim >= srcSize {
			return srcSize, nil // the source's size is in the range
		}
		return 0, status.Errorf(codes.OutOfRange, "capacity range %v: below the source's %d bytes", r, srcSize)
	}
	return size, nil
}

// copyFrom is the fillFunc copying the data of record sm of pool (or
// snapshot store) sp: copyFile for a disk file, copyTree for a data
// directory.
func copyFrom(sp *pool, sm *volumeMeta) fillFunc {
	return func(dst *os.File) error {
		src, err := sp.openData(sm, os.O_RDONLY)
		if err != nil {
			return err
		}
		defer src.Close()
		if sm.AccessType == accessBlock {
			_, err = copyFile(dst, src)
			return err
		}
		_, err = copyTree(dst, src)
		return err
	}
}

// copyStatus is the gRPC status of a failed copy: ResourceExhausted when
// the pool's filesystem is full, Internal otherwise.
func copyStatus(err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// createCopy creates record m in pool (or snapshot store) p like
// p.create, running fill (when not nil) without the driver's lock, with m
// and the source key srcKey marked pending (see copyUnlocked). The caller
// holds the lock.
func (d *Driver) createCopy(p *pool, m *volumeMeta, fill fillFunc, srcKey string) error {
	if fill == nil {
		return p.create(m, nil)
	}
	if err := p.begin(m); err != nil {
		return err
	}
	key := volumeKey(m.ID)
	if p.kind == "snapshot" {
		key = snapshotKey(m.ID)
	}
	if err := d.copyUnlocked([]string{key, srcKey}, func() error { return p.fill(m, fill) }); err != nil {
		return err
	}
	return p.finish(m)
}
