package agent

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	"github.com/converge-dev/converge/nodeplane/vm/domain"
	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
)

// Disk expansion, as KubeVirt's virt-launcher does it for a running VMI
// (pkg/virt-launcher/virtwrap/manager.go: shouldExpandOnline and
// possibleGuestSize, then dom.BlockResize): every pass over a running or
// paused domain resolves its persistentVolumeClaim and dataVolume volumes
// again (Options.Domain.ResolvePVC); when a volume's Capacity (the
// claim's status.capacity) exceeds the capacity of its raw, writable disk
// in the domain, the disk is grown to it online with
// hypervisor.BlockResize (QEMU extends disk.img of a Filesystem volume
// and reads the new size of a Block one) and the guest sees the larger
// device. KubeVirt keeps the claim's filesystem overhead free in a
// Filesystem volume; converge keeps none, as its importer fills disk.img
// to the full capacity (nodeplane/cdi/importcontroller). qcow2 and
// read-only disks are not grown, as KubeVirt. KubeVirt's feature gate
// ExpandDisks is GA since KubeVirt v1.9 (the version converge follows,
// components/virt/featuregates.cue) and can no longer be switched off, so
// expansion is always on. The claim's growth is seen on the next pass:
// a VMI event or the agent's resync (`converge-node vm --resync`).
//
// The VMI's status.volumeStatus lists those volumes as virt-handler does:
// name, target device, persistentVolumeClaimInfo (claimName, capacity,
// volumeMode) and size, the disk's capacity in the domain.

// expandDisks grows the disks of vmi's claims in its running domain d and
// sets their entries of st.VolumeStatus; errors go to res with a retry.
func (a *Agent) expandDisks(st *kubevirtv1.VirtualMachineInstanceStatus, vmi *kubevirtv1.VirtualMachineInstance, d hypervisor.Domain, res *Result) {
	resolve := a.opts.Domain.ResolvePVC
	if resolve == nil || (d.State != hypervisor.Running && d.State != hypervisor.Paused) {
		return
	}
	x, err := a.parsed.parse(d)
	if err != nil || x.Devices == nil {
		return
	}
	byAlias := map[string]libvirtxml.DomainDisk{}
	for _, disk := range x.Devices.Disks {
		if disk.Alias != nil {
			byAlias[disk.Alias.Name] = disk
		}
	}
	id := vmi.Namespace + "/" + vmi.Name
	for _, v := range vmi.Spec.Volumes {
		claim := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		case v.DataVolume != nil:
			claim = v.DataVolume.Name
		default:
			continue
		}
		disk, ok := byAlias["ua-"+v.Name]
		if !ok || disk.Target == nil {
			continue
		}
		src, err := resolve(vmi.Namespace, claim)
		if err != nil {
			a.opts.Log.V(1).Info("disk expansion: volume not resolved", "vmi", id, "volume", v.Name, "reason", err.Error())
			continue
		}
		dev := disk.Target.Dev
		size, err := a.hv.BlockCapacity(d.Name, dev)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("VirtualMachineInstance %s: volume %s: %w", id, v.Name, err))
			res.after(a.opts.RetryAfter)
			continue
		}
		if growable(disk) && src.Capacity > 0 && uint64(src.Capacity) > size {
			if err := a.hv.BlockResize(d.Name, dev, uint64(src.Capacity)); err != nil {
				res.Errors = append(res.Errors, fmt.Errorf("VirtualMachineInstance %s: volume %s: growing disk %s from %d to %d bytes: %w", id, v.Name, dev, size, src.Capacity, err))
				res.after(a.opts.RetryAfter)
			} else {
				a.opts.Log.Info("disk expanded", "vmi", id, "volume", v.Name, "target", dev, "from", size, "to", src.Capacity)
				size = uint64(src.Capacity)
			}
		}
		setVolumeStatus(st, volumeStatus(v.Name, claim, dev, src, size))
	}
}

// setVolumeStatus replaces the status.volumeStatus entry of vs's volume,
// or appends it.
func setVolumeStatus(st *kubevirtv1.VirtualMachineInstanceStatus, vs kubevirtv1.VolumeStatus) {
	for i := range st.VolumeStatus {
		if st.VolumeStatus[i].Name == vs.Name {
			st.VolumeStatus[i] = vs
			return
		}
	}
	st.VolumeStatus = append(st.VolumeStatus, vs)
}

// growable tells whether a domain disk may be grown: raw and writable.
func growable(disk libvirtxml.DomainDisk) bool {
	if disk.ReadOnly != nil || disk.Driver == nil {
		return false
	}
	return disk.Driver.Type == "" || disk.Driver.Type == domain.FormatRaw
}

// volumeStatus gives the status.volumeStatus entry of volume name, the
// disk dev of claim resolved to src, whose capacity in the domain is size.
func volumeStatus(name, claim, dev string, src domain.DiskSource, size uint64) kubevirtv1.VolumeStatus {
	mode := corev1.PersistentVolumeFilesystem
	if src.Block {
		mode = corev1.PersistentVolumeBlock
	}
	info := &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: claim, VolumeMode: &mode}
	if src.Capacity > 0 {
		info.Capacity = corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(src.Capacity, resource.BinarySI)}
	}
	return kubevirtv1.VolumeStatus{Name: name, Target: dev, PersistentVolumeClaimInfo: info, Size: int64(size)}
}
