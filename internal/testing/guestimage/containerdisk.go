package guestimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The layout of a KubeVirt containerDisk (KubeVirt's user guide, "Disks
// and Volumes", containerDisk: `ADD --chown=107:107 disk.qcow2 /disk/`;
// virt-launcher runs QEMU as 107, the qemu user).
const (
	// ContainerDiskDir is the directory of the disk in the image.
	ContainerDiskDir = "disk"
	// ContainerDiskUID and ContainerDiskGID own the disk file.
	ContainerDiskUID, ContainerDiskGID = 107, 107
	// ContainerDiskMode is the disk file's mode.
	ContainerDiskMode = 0o440
)

// ContainerDisk gives an OCI image holding the disk file at path as
// /disk/<base name of path> (ContainerDiskMode, owned by
// ContainerDiskUID:ContainerDiskGID, under a directory /disk of mode
// 0555), one layer, linux/amd64. The layer is reproducible: fixed
// modification times, no user or group names.
func ContainerDisk(path string) (v1.Image, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("containerDisk of %s: %w", path, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: ContainerDiskDir + "/", Mode: 0o555, Uid: ContainerDiskUID, Gid: ContainerDiskGID, ModTime: epoch},
		{Typeflag: tar.TypeReg, Name: ContainerDiskDir + "/" + filepath.Base(path), Mode: ContainerDiskMode, Uid: ContainerDiskUID, Gid: ContainerDiskGID, ModTime: epoch, Size: int64(len(body))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("containerDisk of %s: %w", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(body); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("containerDisk of %s: %w", path, err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	return mutate.ConfigFile(img, cfg)
}
