package cdiimport

import (
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

// Volume is where an import writes on this node.
type Volume struct {
	// Path is the absolute path of the disk image: <pool>/<id>/data/disk.img
	// for a Filesystem volume, <pool>/<id>/disk.img (the driver's block
	// backing file) for a Block volume.
	Path string
	// Block is true for a Block volume.
	Block bool
}

// Resolve maps a PersistentVolume to the Volume it is on this node. ok is
// false (and err nil) when the PV is not this agent's: another CSI driver,
// or node affinity naming another node. err names the PV and says what was
// expected when the PV is the driver's but cannot be used here (a bad
// volume handle, an unknown pool, a volume directory missing or replaced
// by a symlink).
func Resolve(pv *corev1.PersistentVolume, opts Options) (v Volume, ok bool, err error) {
	csi := pv.Spec.CSI
	if csi == nil || csi.Driver != opts.DriverName || !onNode(pv, opts.NodeName) {
		return Volume{}, false, nil
	}
	if err := hostpath.ValidateVolumeID(csi.VolumeHandle); err != nil {
		return Volume{}, true, fmt.Errorf("PersistentVolume %s: %w", pv.Name, err)
	}
	if len(opts.Pools) == 0 {
		return Volume{}, true, fmt.Errorf("PersistentVolume %s: no storage pool configured on node %s", pv.Name, opts.NodeName)
	}
	pool := opts.Pools[0]
	if name := csi.VolumeAttributes[hostpath.ParameterStoragePool]; name != "" {
		found := false
		for _, p := range opts.Pools {
			if p.Name == name {
				pool, found = p, true
			}
		}
		if !found {
			return Volume{}, true, fmt.Errorf("PersistentVolume %s: storage pool %q is not configured on node %s (--storage-pool)", pv.Name, name, opts.NodeName)
		}
	}
	block := pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock
	p, err := volumePath(pool, csi.VolumeHandle, block)
	if err != nil {
		return Volume{}, true, fmt.Errorf("PersistentVolume %s: %w", pv.Name, err)
	}
	return Volume{Path: p, Block: block}, true, nil
}

// volumePath gives the disk image path of volume id in pool, checking that
// the volume directory (and for Filesystem its data directory) is a real
// directory, not a symlink out of the pool.
//
// TODO(hostpath owner): export the driver's path resolution (volumeMeta.
// dataPath with the pool's os.Root checks, e.g. hostpath.DataPath(pool, id,
// block)) and use it here instead of this copy of the layout
// <pool>/<id>/data (Filesystem) and <pool>/<id>/disk.img (Block).
func volumePath(pool hostpath.Pool, id string, block bool) (string, error) {
	dir := filepath.Join(pool.Path, id)
	if err := realDir(dir); err != nil {
		return "", fmt.Errorf("volume %s of storage pool %s: %w", id, pool.Name, err)
	}
	if block {
		return filepath.Join(dir, "disk.img"), nil
	}
	data := filepath.Join(dir, "data")
	if err := realDir(data); err != nil {
		return "", fmt.Errorf("volume %s of storage pool %s: %w", id, pool.Name, err)
	}
	return filepath.Join(data, "disk.img"), nil
}

func realDir(p string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is a %v, expected a directory", p, st.Mode().Type())
	}
	return nil
}

// onNode reports whether pv's required node affinity selects node by
// hostpath.TopologyKey or kubernetes.io/hostname (a PV without node
// affinity is not node-local, so no agent takes it).
func onNode(pv *corev1.PersistentVolume, node string) bool {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil {
		return false
	}
	for _, term := range na.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if (e.Key == hostpath.TopologyKey || e.Key == corev1.LabelHostname) && e.Operator == corev1.NodeSelectorOpIn {
				for _, v := range e.Values {
					if v == node {
						return true
					}
				}
			}
		}
	}
	return false
}
