package vmsnapshot

import (
	"fmt"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// DefaultClassAnnotation marks the default VolumeSnapshotClass of a
// driver (external-snapshotter's IsDefaultSnapshotClassAnnotation).
const DefaultClassAnnotation = "snapshot.storage.kubernetes.io/is-default-class"

// SnapshotClass gives the VolumeSnapshotClass for volumes of a
// StorageClass whose provisioner is driver, as KubeVirt's
// getVolumeSnapshotClassName: the only class of that driver, else the one
// annotated DefaultClassAnnotation; "" when the driver has none, an error
// when it has several and none is the default.
func SnapshotClass(driver string, classes []snapv1.VolumeSnapshotClass) (string, error) {
	var matches []snapv1.VolumeSnapshotClass
	for _, c := range classes {
		if c.Driver == driver {
			matches = append(matches, c)
		}
	}
	switch len(matches) {
	case 0:
		return "", nil
	case 1:
		return matches[0].Name, nil
	}
	for _, c := range matches {
		if _, ok := c.Annotations[DefaultClassAnnotation]; ok {
			return c.Name, nil
		}
	}
	return "", fmt.Errorf("%d matching VolumeSnapshotClasses for %s", len(matches), driver)
}

// Snapshottable tells whether KubeVirt snapshots a volume of this kind
// (isVolumeSnapshottable: persistentVolumeClaim, dataVolume, memoryDump).
func Snapshottable(v kubevirtv1.Volume) bool {
	return v.PersistentVolumeClaim != nil || v.DataVolume != nil || v.MemoryDump != nil
}

// ClaimName gives the PVC behind a volume: a persistentVolumeClaim's or
// memoryDump's claim, a dataVolume's PVC (named as the DataVolume), or ""
// (KubeVirt's storagetypes.GetPVCsFromVolumes).
func ClaimName(v kubevirtv1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.MemoryDump != nil:
		return v.MemoryDump.ClaimName
	case v.DataVolume != nil:
		return v.DataVolume.Name
	}
	return ""
}

// Claims gives the PVC of each volume of vm's template that has one,
// volume name → claim name.
func Claims(vm *kubevirtv1.VirtualMachine) map[string]string {
	out := map[string]string{}
	if vm.Spec.Template == nil {
		return out
	}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if c := ClaimName(v); c != "" {
			out[v.Name] = c
		}
	}
	return out
}

// SplitVolumes gives the names of vm's template volumes that have a
// backup in backedUp (included) and the others (excluded), in the
// template's order, and whether an excluded one was snapshottable (a
// partial snapshot), as KubeVirt's updateSnapshotSnapshotableVolumes.
func SplitVolumes(vm *kubevirtv1.VirtualMachine, backedUp map[string]bool) (included, excluded []string, partial bool) {
	if vm == nil || vm.Spec.Template == nil {
		return nil, nil, false
	}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if backedUp[v.Name] {
			included = append(included, v.Name)
			continue
		}
		excluded = append(excluded, v.Name)
		if Snapshottable(v) {
			partial = true
		}
	}
	return included, excluded, partial
}
