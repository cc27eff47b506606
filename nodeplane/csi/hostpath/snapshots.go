package hostpath

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// checkSnapshotParameters accepts only the csi.storage.k8s.io/ keys
// external-snapshotter adds (--extra-create-metadata): a snapshot lives in
// its source volume's pool, so there is nothing to choose.
func checkSnapshotParameters(params map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !strings.HasPrefix(k, "csi.storage.k8s.io/") {
			return status.Errorf(codes.InvalidArgument, "parameter %q: unknown (snapshots take no parameters)", k)
		}
	}
	return nil
}

// csiSnapshot is the CSI view of a Ready snapshot record.
func csiSnapshot(m *volumeMeta) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     m.ID,
		SourceVolumeId: m.SourceVolumeID,
		SizeBytes:      m.CapacityBytes,
		CreationTime:   timestamppb.New(m.CreationTime),
		ReadyToUse:     m.State == stateReady,
	}
}

// CreateSnapshot takes snapshot req.name of volume req.source_volume_id: a
// copy of the volume's data in <pool>/.snapshots/<name> of the volume's
// pool, made by reflink where the filesystem shares extents and by sparse
// copy otherwise (see copyFile, copyTree). The snapshot is ReadyToUse when
// the call returns. It is crash-consistent for a volume in use: each file
// is copied as it is at that moment (a reflink atomically), nothing is
// frozen. The same name and source again returns the existing snapshot; the
// same name with another source is AlreadyExists; a missing source is
// NotFound; malformed names and IDs are InvalidArgument.
func (s *controllerServer) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	name, source := req.GetName(), req.GetSourceVolumeId()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "name: required")
	}
	if err := ValidateSnapshotID(name); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "name: %v", err)
	}
	if source == "" {
		return nil, status.Error(codes.InvalidArgument, "source volume ID: required")
	}
	if err := checkSnapshotParameters(req.GetParameters()); err != nil {
		return nil, err
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkPending(snapshotKey(name)); err != nil {
		return nil, err
	}
	existing, err := d.lookupSnapshot(name)
	switch {
	case err == nil:
		defer existing.close()
		if existing.meta.SourceVolumeID != source {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %s: exists, of volume %s; request is of volume %s", name, existing.meta.SourceVolumeID, source)
		}
		if existing.meta.State == stateReady {
			return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(existing.meta)}, nil
		}
		// Creating or Deleting: a failed earlier call; start over.
	case status.Code(err) != codes.NotFound:
		return nil, err
	}
	p, src, err := d.lookupReady(source)
	if err != nil {
		return nil, err
	}
	var store *pool
	if existing != nil {
		store = existing.store
	} else {
		if store, err = p.snapshots(true); err != nil {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		defer store.close()
		if _, err := store.root.Lstat(name); err == nil {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %s: pool %s already has an entry %s/%s that is not a snapshot of this driver", name, p.Name, snapshotsDir, name)
		}
	}
	m := &volumeMeta{
		ID: name, Pool: p.Name, CapacityBytes: src.CapacityBytes, AccessType: src.AccessType,
		SourceVolumeID: src.ID, CreationTime: time.Now().UTC(),
	}
	if err := d.createCopy(store, m, copyFrom(p, src), volumeKey(src.ID)); err != nil {
		return nil, copyStatus(err)
	}
	return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(m)}, nil
}

// DeleteSnapshot removes a snapshot (volumes restored from it are
// independent copies and stay); an unknown ID is success, a malformed one
// InvalidArgument. The pool's .snapshots directory goes with its last
// snapshot.
func (s *controllerServer) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if req.GetSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot ID: required")
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkPending(snapshotKey(req.GetSnapshotId())); err != nil {
		return nil, err
	}
	r, err := d.lookupSnapshot(req.GetSnapshotId())
	if status.Code(err) == codes.NotFound {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	err = r.store.remove(r.meta)
	r.close()
	if err == nil {
		err = r.pool.removeSnapshotsIfEmpty()
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// GetSnapshot returns one Ready snapshot; a missing one is NotFound, a
// malformed or empty ID InvalidArgument.
func (s *controllerServer) GetSnapshot(_ context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	if req.GetSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot ID: required")
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	r, err := d.lookupReadySnapshot(req.GetSnapshotId())
	if err != nil {
		return nil, err
	}
	defer r.close()
	return &csi.GetSnapshotResponse{Snapshot: csiSnapshot(r.meta)}, nil
}

// ListSnapshots lists the Ready snapshots of every pool by ID, filtered by
// snapshot_id and source_volume_id when set (an ID that cannot exist,
// malformed included, gives an empty list). Tokens name the next ID as in
// ListVolumes; a token not from this driver is Aborted.
func (s *controllerServer) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "max_entries %d: must not be negative", req.GetMaxEntries())
	}
	start := ""
	if req.GetStartingToken() != "" {
		var err error
		if start, err = parseListToken(req.GetStartingToken()); err != nil {
			return nil, err
		}
	}
	if id := req.GetSnapshotId(); id != "" && ValidateSnapshotID(id) != nil {
		return &csi.ListSnapshotsResponse{}, nil
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	all, err := d.allSnapshots()
	if err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(m *volumeMeta) bool {
		return req.GetSnapshotId() != "" && m.ID != req.GetSnapshotId() ||
			req.GetSourceVolumeId() != "" && m.SourceVolumeID != req.GetSourceVolumeId()
	})
	i, _ := slices.BinarySearchFunc(all, start, func(m *volumeMeta, id string) int { return strings.Compare(m.ID, id) })
	all = all[i:]
	resp := &csi.ListSnapshotsResponse{}
	if n := int(req.GetMaxEntries()); n > 0 && len(all) > n {
		resp.NextToken = listToken(all[n].ID)
		all = all[:n]
	}
	for _, m := range all {
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: csiSnapshot(m)})
	}
	return resp, nil
}

// allSnapshots returns the Ready snapshots of every pool, sorted by ID.
// The caller holds the lock.
func (d *Driver) allSnapshots() ([]*volumeMeta, error) {
	var all []*volumeMeta
	for _, p := range d.pools {
		if !p.mounted() {
			continue
		}
		if err := p.check(); err != nil {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		store, err := p.snapshots(false)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		snaps, err := store.list()
		store.close()
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		all = append(all, snaps...)
	}
	slices.SortFunc(all, func(a, b *volumeMeta) int { return strings.Compare(a.ID, b.ID) })
	return all, nil
}
