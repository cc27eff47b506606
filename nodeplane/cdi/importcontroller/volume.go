package importcontroller

import (
	"fmt"
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
// by a symlink: hostpath.LookupVolume), or when the PV's volumeMode is not
// the volume's access type.
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
	data, err := hostpath.LookupVolume(pool, csi.VolumeHandle)
	if err != nil {
		return Volume{}, true, fmt.Errorf("PersistentVolume %s: %w", pv.Name, err)
	}
	if data.Block != block {
		return Volume{}, true, fmt.Errorf("PersistentVolume %s: volumeMode %s, but volume %s of storage pool %s is a %s volume", pv.Name, modeName(block), csi.VolumeHandle, pool.Name, modeName(data.Block))
	}
	if block {
		return Volume{Path: data.Path, Block: true}, true, nil
	}
	return Volume{Path: filepath.Join(data.Path, DiskImage)}, true, nil
}

// DiskImage is the file name of a VM disk in a Filesystem volume's data
// directory, as KubeVirt and CDI use it.
const DiskImage = "disk.img"

func modeName(block bool) string {
	if block {
		return string(corev1.PersistentVolumeBlock)
	}
	return string(corev1.PersistentVolumeFilesystem)
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
