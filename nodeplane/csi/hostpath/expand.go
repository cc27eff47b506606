package hostpath

import (
	"context"
	"fmt"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/converge-dev/converge/nodeplane/csi/loopdev"
)

// ControllerExpandVolume grows volume req.volume_id to volumeSize of the
// capacity range, online: a block volume's disk file is extended (sparse)
// and every loop device attached to it takes the new size at once
// (LOOP_SET_CAPACITY), so a published device grows under its user; a
// filesystem volume (a directory, not quota-limited) only records the new
// capacity. A volume already as large is success with its capacity;
// shrinking (a limit below the capacity) is OutOfRange, growth beyond the
// pool's free space OutOfRange, a missing volume NotFound, a missing ID or
// capacity range InvalidArgument. node_expansion_required is true for
// block volumes, whose NodeExpandVolume checks the device size.
func (s *controllerServer) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID: required")
	}
	r := req.GetCapacityRange()
	if r == nil || r.GetRequiredBytes() == 0 && r.GetLimitBytes() == 0 {
		return nil, status.Error(codes.InvalidArgument, "capacity range: required")
	}
	size, err := volumeSize(r)
	if err != nil {
		return nil, err
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkPending(volumeKey(req.GetVolumeId())); err != nil {
		return nil, err
	}
	p, m, err := d.lookupReady(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if c := req.GetVolumeCapability(); c != nil {
		if access, err := capabilityAccess(c); err != nil || access != m.AccessType {
			return nil, status.Errorf(codes.InvalidArgument, "volume %s: a %s volume; volume capability %v does not match (%v)", m.ID, m.AccessType, c, err)
		}
	}
	block := m.AccessType == accessBlock
	if lim := r.GetLimitBytes(); lim > 0 && m.CapacityBytes > lim {
		return nil, status.Errorf(codes.OutOfRange, "volume %s: %d bytes, over limit_bytes %d: volumes do not shrink", m.ID, m.CapacityBytes, lim)
	}
	if size <= m.CapacityBytes {
		return &csi.ControllerExpandVolumeResponse{CapacityBytes: m.CapacityBytes, NodeExpansionRequired: block}, nil
	}
	if _, avail, err := p.space(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if size-m.CapacityBytes > avail {
		return nil, status.Errorf(codes.OutOfRange, "volume %s: growing by %d bytes, pool %s has %d bytes available", m.ID, size-m.CapacityBytes, p.Name, avail)
	}
	if block {
		if err := growDisk(p, m, size); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", m.ID, err)
		}
	}
	m.CapacityBytes = size
	if err := p.write(m); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: size, NodeExpansionRequired: block}, nil
}

// growDisk extends m's disk file to size bytes and refreshes its loop
// devices (see refreshLoops).
func growDisk(p *pool, m *volumeMeta, size int64) error {
	f, err := p.openData(m, os.O_RDWR)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("growing %s to %d bytes: %w", diskFile, size, err)
	}
	return refreshLoops(f, size)
}

// refreshLoops makes every loop device attached to the disk file f take
// its size, and checks each has want bytes.
func refreshLoops(f *os.File, want int64) error {
	devs, err := loopdev.Find(f)
	if err != nil {
		return err
	}
	for _, dev := range devs {
		n, err := loopdev.SetCapacity(dev)
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("loop device %s has %d bytes after LOOP_SET_CAPACITY, want %d", dev, n, want)
		}
	}
	return nil
}

// NodeExpandVolume makes the node's view of volume req.volume_id match its
// capacity, online: for a block volume every loop device attached to its
// disk file takes the file's size (the device a publication bind-mounts
// grows under its user); a filesystem volume is a directory with nothing to
// grow. volume_path is required but not consulted: the driver finds the
// volume's devices itself. It answers the recorded capacity. A missing ID or
// volume_path is InvalidArgument, an unknown volume NotFound, a capacity
// range above the recorded capacity (ControllerExpandVolume not done yet)
// FailedPrecondition.
func (s *nodeServer) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID: required")
	}
	if req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume path: required")
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	p, m, err := d.lookupReady(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if c := req.GetVolumeCapability(); c != nil {
		if access, err := capabilityAccess(c); err != nil || access != m.AccessType {
			return nil, status.Errorf(codes.InvalidArgument, "volume %s: a %s volume; volume capability %v does not match (%v)", m.ID, m.AccessType, c, err)
		}
	}
	if want := req.GetCapacityRange().GetRequiredBytes(); want > m.CapacityBytes {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s: %d bytes requested, capacity is %d: ControllerExpandVolume first", m.ID, want, m.CapacityBytes)
	}
	if m.AccessType == accessBlock {
		f, err := p.openData(m, os.O_RDONLY)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", m.ID, err)
		}
		defer f.Close()
		if err := refreshLoops(f, m.CapacityBytes); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", m.ID, err)
		}
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: m.CapacityBytes}, nil
}
