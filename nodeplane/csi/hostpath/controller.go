package hostpath

import (
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/converge-dev/converge/nodeplane/csi/loopdev"
)

// controllerServer is the CSI Controller service.
type controllerServer struct {
	csi.UnimplementedControllerServer
	d *Driver
}

func (s *controllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_GET_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// checkParameters accepts only storagePool and the csi.storage.k8s.io/
// keys external-provisioner adds.
func checkParameters(params map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if k != ParameterStoragePool && !strings.HasPrefix(k, "csi.storage.k8s.io/") {
			return status.Errorf(codes.InvalidArgument, "parameter %q: unknown (want %s)", k, ParameterStoragePool)
		}
	}
	return nil
}

// CreateVolume creates volume req.name in the requested pool, or returns the
// existing one when it matches (same pool, access type, content source, and
// a capacity in the range); a mismatch is AlreadyExists. With a
// volume_content_source the volume starts as a copy of that volume (clone)
// or snapshot (restore), of the same access type (else InvalidArgument),
// made by reflink or sparse copy (see copyFile); a missing source is
// NotFound, a capacity below the source's OutOfRange, and without a
// capacity range the volume has the source's size.
func (s *controllerServer) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "name: required")
	}
	if err := ValidateVolumeID(name); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "name: %v", err)
	}
	access, err := capabilitiesAccess(req.GetVolumeCapabilities())
	if err != nil {
		return nil, err
	}
	source, err := parseContentSource(req.GetVolumeContentSource())
	if err != nil {
		return nil, err
	}
	if err := checkParameters(req.GetParameters()); err != nil {
		return nil, err
	}
	size, err := volumeSize(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	if ar := req.GetAccessibilityRequirements(); ar != nil && !s.d.reachable(ar.GetRequisite()) {
		return nil, status.Errorf(codes.ResourceExhausted, "volume %s: requisite topology %v does not include this node (%s=%s)", name, ar.GetRequisite(), TopologyKey, s.d.opts.NodeID)
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkPending(volumeKey(name)); err != nil {
		return nil, err
	}
	p, err := d.poolByName(req.GetParameters())
	if err != nil {
		return nil, err
	}
	if err := p.check(); err != nil {
		return nil, checkStatus(err)
	}
	ep, existing, err := d.lookup(name)
	switch {
	case err == nil:
		if ep != p || existing.AccessType != access || !source.matches(existing) || (existing.State == stateReady && !fits(existing.CapacityBytes, req.GetCapacityRange())) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s: exists in pool %s as a %d-byte %s volume (source %v); request is pool %s, %s, capacity range %v, source %v",
				name, ep.Name, existing.CapacityBytes, existing.AccessType, contentSource{existing.SourceVolumeID, existing.SourceSnapshotID}, p.Name, access, req.GetCapacityRange(), source)
		}
		if existing.State == stateReady {
			return &csi.CreateVolumeResponse{Volume: d.csiVolume(existing)}, nil
		}
		// Creating or Deleting: a failed earlier call; start over.
	case status.Code(err) != codes.NotFound:
		return nil, err
	}
	if _, err := p.root.Lstat(name); err == nil && existing == nil {
		return nil, status.Errorf(codes.AlreadyExists, "volume %s: pool %s already has an entry %s that is not a volume of this driver", name, p.Name, name)
	}
	var fill fillFunc
	if source != (contentSource{}) {
		src, err := d.resolve(source)
		if err != nil {
			return nil, err
		}
		defer src.release()
		if src.meta.AccessType != access {
			return nil, status.Errorf(codes.InvalidArgument, "volume %s: source %s is a %s volume, capabilities ask for %s", name, src.meta.ID, src.meta.AccessType, access)
		}
		if size, err = cloneSize(req.GetCapacityRange(), src.meta.CapacityBytes); err != nil {
			return nil, err
		}
		fill = copyFrom(src.pool, src.meta)
	}
	if _, avail, err := p.space(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if size > avail {
		return nil, status.Errorf(codes.OutOfRange, "volume %s: %d bytes requested, pool %s has %d bytes available", name, size, p.Name, avail)
	}
	m := &volumeMeta{ID: name, Pool: p.Name, CapacityBytes: size, AccessType: access, SourceVolumeID: source.volumeID, SourceSnapshotID: source.snapshotID}
	if err := d.createCopy(p, m, fill, source.key()); err != nil {
		return nil, copyStatus(err)
	}
	return &csi.CreateVolumeResponse{Volume: d.csiVolume(m)}, nil
}

// DeleteVolume removes a volume that is not published; an unknown ID is
// success, a malformed one InvalidArgument. Loop devices still attached to
// a block volume's file are detached first.
func (s *controllerServer) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID: required")
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkPending(volumeKey(req.GetVolumeId())); err != nil {
		return nil, err
	}
	p, m, err := d.lookup(req.GetVolumeId())
	if status.Code(err) == codes.NotFound {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if len(m.Publications) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s: still published at %s", m.ID, m.Publications[0].TargetPath)
	}
	if m.AccessType == accessBlock {
		if err := detachAll(p, m); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	if err := p.remove(m); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// detachAll detaches every loop device backed by m's disk file.
func detachAll(p *pool, m *volumeMeta) error {
	f, err := p.openData(m, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNotVolume) {
		return nil // no disk file of ours: nothing can be attached
	}
	if err != nil {
		return err
	}
	defer f.Close()
	devs, err := loopdev.Find(f)
	if err != nil {
		return err
	}
	for _, dev := range devs {
		if err := loopdev.Detach(dev); err != nil {
			return err
		}
	}
	return nil
}

// listTokenPrefix versions the ListVolumes token: "v1." + base64url(ID of
// the first volume of the next page).
const listTokenPrefix = "v1."

func listToken(id string) string {
	return listTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(id))
}

func parseListToken(tok string) (string, error) {
	rest, ok := strings.CutPrefix(tok, listTokenPrefix)
	if !ok {
		return "", status.Errorf(codes.Aborted, "starting_token %q: not a token of this driver", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || ValidateVolumeID(string(b)) != nil {
		return "", status.Errorf(codes.Aborted, "starting_token %q: malformed", tok)
	}
	return string(b), nil
}

// ListVolumes lists the Ready volumes of every pool by ID. Tokens name the
// next ID, so paging stays consistent when volumes are added or deleted
// between pages.
func (s *controllerServer) ListVolumes(_ context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
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
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	var all []*volumeMeta
	for _, p := range d.pools {
		if !p.mounted() {
			continue // no volume there yet
		}
		if err := p.check(); err != nil {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		vols, err := p.list()
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		all = append(all, vols...)
	}
	slices.SortFunc(all, func(a, b *volumeMeta) int { return strings.Compare(a.ID, b.ID) })
	i, _ := slices.BinarySearchFunc(all, start, func(m *volumeMeta, id string) int { return strings.Compare(m.ID, id) })
	all = all[i:]
	resp := &csi.ListVolumesResponse{}
	if n := int(req.GetMaxEntries()); n > 0 && len(all) > n {
		resp.NextToken = listToken(all[n].ID)
		all = all[:n]
	}
	for _, m := range all {
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{Volume: d.csiVolume(m)})
	}
	return resp, nil
}

// GetCapacity returns the available bytes of the pool's filesystem
// (statfs f_bavail), or 0 for capabilities or a topology this driver cannot
// serve.
func (s *controllerServer) GetCapacity(_ context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	if err := checkParameters(req.GetParameters()); err != nil {
		return nil, err
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.poolByName(req.GetParameters())
	if err != nil {
		return nil, err
	}
	if len(req.GetVolumeCapabilities()) > 0 {
		if _, err := capabilitiesAccess(req.GetVolumeCapabilities()); err != nil {
			return &csi.GetCapacityResponse{}, nil
		}
	}
	if t := req.GetAccessibleTopology(); t != nil && !d.reachable([]*csi.Topology{t}) {
		return &csi.GetCapacityResponse{}, nil
	}
	if err := p.check(); err != nil {
		return nil, checkStatus(err)
	}
	_, avail, err := p.space()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.GetCapacityResponse{AvailableCapacity: avail}, nil
}

// ValidateVolumeCapabilities confirms the capabilities when every one is
// supported and of the volume's access type; otherwise it answers with a
// message and no confirmation.
func (s *controllerServer) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID: required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities: required")
	}
	d := s.d
	d.mu.Lock()
	_, m, err := d.lookupReady(req.GetVolumeId())
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	access, err := capabilitiesAccess(req.GetVolumeCapabilities())
	if err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	if access != m.AccessType {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: "volume " + m.ID + " is a " + m.AccessType + " volume, capabilities ask for " + access}, nil
	}
	if err := checkParameters(req.GetParameters()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}
