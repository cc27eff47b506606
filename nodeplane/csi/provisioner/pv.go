package provisioner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnSelectedNode is the PVC annotation kube-scheduler sets to the node it
// picked for a WaitForFirstConsumer claim.
const AnnSelectedNode = "volume.kubernetes.io/selected-node"

// ParameterPrefix starts the StorageClass parameters addressed to the
// provisioner rather than the driver (csi.storage.k8s.io/fstype, …); they
// are not passed to CreateVolume, as csi-provisioner strips them.
const ParameterPrefix = "csi.storage.k8s.io/"

// ParameterFSType is the StorageClass parameter giving the fsType of
// filesystem volumes (csi-provisioner's name); empty when absent.
const ParameterFSType = ParameterPrefix + "fstype"

// volumeCapabilities maps the claim's access modes and volume mode to CSI
// volume capabilities, as csi-provisioner does for a driver with the
// SINGLE_NODE_MULTI_WRITER capability: ReadWriteOnce is
// SINGLE_NODE_MULTI_WRITER, ReadWriteOncePod SINGLE_NODE_SINGLE_WRITER,
// ReadOnlyMany MULTI_NODE_READER_ONLY, ReadWriteMany
// MULTI_NODE_MULTI_WRITER (which a node-local driver refuses).
func volumeCapabilities(claim *corev1.PersistentVolumeClaim, fsType string, mountFlags []string) ([]*csi.VolumeCapability, error) {
	if len(claim.Spec.AccessModes) == 0 {
		return nil, fmt.Errorf("PersistentVolumeClaim %s/%s: spec.accessModes: at least one required", claim.Namespace, claim.Name)
	}
	var caps []*csi.VolumeCapability
	for _, m := range claim.Spec.AccessModes {
		var mode csi.VolumeCapability_AccessMode_Mode
		switch m {
		case corev1.ReadWriteOnce:
			mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		case corev1.ReadWriteOncePod:
			mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		case corev1.ReadOnlyMany:
			mode = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
		case corev1.ReadWriteMany:
			mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		default:
			return nil, fmt.Errorf("PersistentVolumeClaim %s/%s: access mode %q: want ReadWriteOnce, ReadWriteOncePod, ReadOnlyMany or ReadWriteMany", claim.Namespace, claim.Name, m)
		}
		c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
		if isBlock(claim) {
			c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		} else {
			c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: mountFlags}}
		}
		caps = append(caps, c)
	}
	return caps, nil
}

func isBlock(claim *corev1.PersistentVolumeClaim) bool {
	return claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock
}

// driverParameters returns the StorageClass parameters without the
// ParameterPrefix keys.
func driverParameters(class *storagev1.StorageClass) map[string]string {
	out := map[string]string{}
	for k, v := range class.Parameters {
		if !strings.HasPrefix(k, ParameterPrefix) {
			out[k] = v
		}
	}
	return out
}

// nodeAffinity turns a volume's accessible topology into a required PV
// node affinity: one term per topology, each segment a key In [value]
// expression (csi-provisioner GenerateVolumeNodeAffinity). No topology
// gives nil (the volume is reachable from anywhere).
func nodeAffinity(tops []*csi.Topology) *corev1.VolumeNodeAffinity {
	if len(tops) == 0 {
		return nil
	}
	var terms []corev1.NodeSelectorTerm
	for _, t := range tops {
		var exprs []corev1.NodeSelectorRequirement
		for _, k := range slices.Sorted(maps.Keys(t.GetSegments())) {
			exprs = append(exprs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{t.GetSegments()[k]}})
		}
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
	}
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
}

// OnNode reports whether PV pv is a volume of a node with the given
// topology segments (its required node affinity admits them; see
// affinityMatches): the test the node-local provisioner and resizer use to
// take only their own node's volumes.
func OnNode(pv *corev1.PersistentVolume, segments map[string]string) bool {
	return affinityMatches(pv, segments)
}

// affinityMatches reports whether a PV's required node affinity admits a
// node with the given topology segments: some term whose every expression
// is a key In values the segments satisfy. A PV without node affinity
// matches no node (a node-local provisioner must not claim it).
func affinityMatches(pv *corev1.PersistentVolume, segments map[string]string) bool {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil {
		return false
	}
	for _, term := range na.Required.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 {
			continue
		}
		ok := true
		for _, e := range term.MatchExpressions {
			v, has := segments[e.Key]
			if e.Operator != corev1.NodeSelectorOpIn || !has || !slices.Contains(e.Values, v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// buildPV is the PV for a created volume (see the package comment).
func buildPV(name, driver string, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, vol *csi.Volume) *corev1.PersistentVolume {
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	mode := corev1.PersistentVolumeFilesystem
	if isBlock(claim) {
		mode = corev1.PersistentVolumeBlock
	}
	src := &corev1.CSIPersistentVolumeSource{
		Driver:           driver,
		VolumeHandle:     vol.GetVolumeId(),
		VolumeAttributes: vol.GetVolumeContext(),
	}
	if mode == corev1.PersistentVolumeFilesystem {
		src.FSType = class.Parameters[ParameterFSType]
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(vol.GetCapacityBytes(), resource.BinarySI)},
			AccessModes:                   slices.Clone(claim.Spec.AccessModes),
			VolumeMode:                    &mode,
			PersistentVolumeReclaimPolicy: reclaim,
			MountOptions:                  slices.Clone(class.MountOptions),
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: src},
			NodeAffinity:                  nodeAffinity(vol.GetAccessibleTopology()),
		},
	}
}
