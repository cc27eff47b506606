package hostpath

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/converge-dev/converge/nodeplane/csi/loopdev"
)

// nodeServer is the CSI Node service.
type nodeServer struct {
	csi.UnimplementedNodeServer
	d *Driver
}

func (s *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: s.d.opts.NodeID, AccessibleTopology: s.d.topology()}, nil
}

func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
	} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// checkTargetPath requires an absolute, clean path without NUL bytes.
func checkTargetPath(field, p string) error {
	if p == "" {
		return status.Errorf(codes.InvalidArgument, "%s: required", field)
	}
	if strings.ContainsRune(p, 0) || !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
		return status.Errorf(codes.InvalidArgument, "%s %q: must be an absolute, clean path other than /", field, p)
	}
	return nil
}

// NodePublishVolume bind-mounts the volume's data directory (mount) or its
// loop device (block) on target_path, creating the target directory or
// file. Publishing again with the same arguments is success; with other
// arguments AlreadyExists; a SINGLE_NODE_SINGLE_WRITER volume published
// elsewhere is FailedPrecondition.
func (s *nodeServer) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID: required")
	}
	if err := checkTargetPath("target_path", req.GetTargetPath()); err != nil {
		return nil, err
	}
	if req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "volume capability: required")
	}
	access, err := capabilityAccess(req.GetVolumeCapability())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	pub := publication{
		TargetPath: req.GetTargetPath(),
		ReadOnly:   req.GetReadonly() || mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		AccessMode: mode.String(),
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	p, m, err := d.lookupReady(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if access != m.AccessType {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: is a %s volume, capability asks for %s", m.ID, m.AccessType, access)
	}
	target := pub.TargetPath
	if old, ok := m.publication(target); ok {
		if old != pub {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s: already published at %s with %+v, request is %+v", m.ID, target, old, pub)
		}
		if mounted, err := isMounted(target); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		} else if mounted {
			return &csi.NodePublishVolumeResponse{}, nil
		}
		// Recorded but not mounted (the node rebooted): mount again.
	} else {
		for _, o := range m.Publications {
			if o.AccessMode == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER.String() || mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER {
				return nil, status.Errorf(codes.FailedPrecondition, "volume %s: published at %s as %s, cannot also publish at %s as %s", m.ID, o.TargetPath, o.AccessMode, target, pub.AccessMode)
			}
		}
	}
	if err := unmountAll(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := s.mount(p, m, pub); err != nil {
		if m.AccessType == accessBlock && len(m.Publications) == 0 {
			_ = detachAll(p, m) // do not leak the loop device attached for this call
		}
		return nil, status.Errorf(codes.Internal, "volume %s: %v", m.ID, err)
	}
	if _, ok := m.publication(target); !ok {
		m.Publications = append(m.Publications, pub)
	}
	if err := p.write(m); err != nil {
		_ = unmountAll(target)
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// mount creates the target and bind-mounts the volume on it.
func (s *nodeServer) mount(p *pool, m *volumeMeta, pub publication) error {
	target := pub.TargetPath
	if m.AccessType == accessMount {
		if err := os.Mkdir(target, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if st, err := os.Lstat(target); err != nil || !st.IsDir() {
			return fmt.Errorf("target %s: not a directory", target)
		}
		src, err := p.openData(m, os.O_RDONLY)
		if err != nil {
			return err
		}
		defer src.Close()
		return bindMount(src, target, pub.ReadOnly)
	}
	dev, err := attach(p, m)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY|unix.O_NOFOLLOW, 0o660)
	if err != nil {
		return fmt.Errorf("target %s: %w", target, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("target %s: not a regular file", target)
	}
	src, err := os.Open(dev)
	if err != nil {
		return err
	}
	defer src.Close()
	return bindMount(src, target, pub.ReadOnly)
}

// attach returns the loop device of m's disk file, attaching one when none
// is attached yet.
func attach(p *pool, m *volumeMeta) (string, error) {
	f, err := p.openData(m, os.O_RDWR)
	if err != nil {
		return "", err
	}
	defer f.Close()
	devs, err := loopdev.Find(f)
	if err != nil {
		return "", err
	}
	if len(devs) > 0 {
		return devs[0], nil
	}
	return loopdev.Attach(f, false)
}

// NodeUnpublishVolume unmounts and removes target_path when the volume is
// published there; for a block volume without other publications it
// detaches the loop device. An unpublished target is success; an unknown
// volume NotFound.
func (s *nodeServer) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID: required")
	}
	if err := checkTargetPath("target_path", req.GetTargetPath()); err != nil {
		return nil, err
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	p, m, err := d.lookup(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	target := req.GetTargetPath()
	// Only a recorded publication is unmounted: a target this driver did
	// not mount for this volume is left alone.
	if _, recorded := m.publication(target); recorded {
		if err := unmountAll(target); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", m.ID, err)
		}
		if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, status.Errorf(codes.Internal, "volume %s: removing target: %v", m.ID, err)
		}
		m.Publications = slices.DeleteFunc(m.Publications, func(o publication) bool { return o.TargetPath == target })
		if err := p.write(m); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	if m.AccessType == accessBlock && len(m.Publications) == 0 {
		if err := detachAll(p, m); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", m.ID, err)
		}
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports the usage of a published volume: the bytes and
// inodes of the pool filesystem for a filesystem volume, the capacity for
// a block volume. A volume not published at volume_path is NotFound.
func (s *nodeServer) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID: required")
	}
	if req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume path: required")
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	_, m, err := d.lookupReady(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	target := req.GetVolumePath()
	if _, ok := m.publication(target); !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s: not published at %s", m.ID, target)
	}
	if mounted, err := isMounted(target); err != nil || !mounted {
		return nil, status.Errorf(codes.NotFound, "volume %s: %s is not mounted", m.ID, target)
	}
	if m.AccessType == accessBlock {
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: m.CapacityBytes}}}, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: statfs %s: %v", m.ID, target, err)
	}
	bs := st.Bsize
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs, Used: int64(st.Blocks-st.Bfree) * bs},
		{Unit: csi.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
	}}, nil
}
