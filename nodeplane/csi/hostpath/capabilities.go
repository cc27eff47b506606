package hostpath

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// supportedModes are the access modes of a node-local volume.
var supportedModes = map[csi.VolumeCapability_AccessMode_Mode]bool{
	csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER:        true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:   true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER: true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:  true,
}

// capabilityAccess checks one capability and returns its access type
// (accessMount or accessBlock).
func capabilityAccess(c *csi.VolumeCapability) (string, error) {
	if c == nil {
		return "", fmt.Errorf("volume capability: required")
	}
	mode := c.GetAccessMode().GetMode()
	if !supportedModes[mode] {
		return "", fmt.Errorf("volume capability: access mode %s not supported (node-local volumes: SINGLE_NODE_*)", mode)
	}
	switch {
	case c.GetBlock() != nil:
		return accessBlock, nil
	case c.GetMount() != nil:
		return accessMount, nil
	}
	return "", fmt.Errorf("volume capability: access type (mount or block) required")
}

// capabilitiesAccess checks a CreateVolume capability list: non-empty,
// every entry supported, all of one access type. Errors are InvalidArgument.
func capabilitiesAccess(caps []*csi.VolumeCapability) (string, error) {
	if len(caps) == 0 {
		return "", status.Error(codes.InvalidArgument, "volume capabilities: required")
	}
	var access string
	for i, c := range caps {
		a, err := capabilityAccess(c)
		if err != nil {
			return "", status.Errorf(codes.InvalidArgument, "volume capabilities[%d]: %v", i, err)
		}
		if access != "" && a != access {
			return "", status.Errorf(codes.InvalidArgument, "volume capabilities[%d]: access type %s mixed with %s", i, a, access)
		}
		access = a
	}
	return access, nil
}

// sectorSize is the granularity of volume sizes: the loop device's logical
// block size, so a block volume's device is exactly its capacity.
const sectorSize = 512

// volumeSize turns a capacity range into a size in bytes: required_bytes
// (or DefaultVolumeSize capped at limit_bytes when unset), rounded up to
// sectorSize. Negative values are InvalidArgument; a limit below the
// required size, or a rounded size over the limit, is OutOfRange.
func volumeSize(r *csi.CapacityRange) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	if req < 0 || lim < 0 {
		return 0, status.Errorf(codes.InvalidArgument, "capacity range: required_bytes %d and limit_bytes %d must not be negative", req, lim)
	}
	if lim > 0 && req > lim {
		return 0, status.Errorf(codes.OutOfRange, "capacity range: required_bytes %d over limit_bytes %d", req, lim)
	}
	size := req
	if size == 0 {
		size = DefaultVolumeSize
		if lim > 0 && lim < size {
			size = lim
		}
	}
	if rem := size % sectorSize; rem != 0 {
		size += sectorSize - rem
	}
	if lim > 0 && size > lim {
		return 0, status.Errorf(codes.OutOfRange, "capacity range: %d bytes rounded up to %d-byte sectors is %d, over limit_bytes %d", req, sectorSize, size, lim)
	}
	return size, nil
}

// fits reports whether an existing volume of size bytes satisfies r.
func fits(size int64, r *csi.CapacityRange) bool {
	return size >= r.GetRequiredBytes() && (r.GetLimitBytes() == 0 || size <= r.GetLimitBytes())
}
