package instancetype

import (
	"reflect"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"
)

// applyDevicePreferences fills in the devices' unset fields (kubevirt
// pkg/instancetype/preference/apply/device.go ApplyDevicePreferences).
func applyDevicePreferences(pref *v1beta1.VirtualMachinePreferenceSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) {
	p := pref.Devices
	if p == nil {
		return
	}
	d := &spec.Domain.Devices
	setBool(&d.UseVirtioTransitional, p.PreferredUseVirtioTransitional)
	setBool(&d.BlockMultiQueue, p.PreferredBlockMultiQueue)
	setBool(&d.NetworkInterfaceMultiQueue, p.PreferredNetworkInterfaceMultiQueue)
	// DisableHotplug is not a pointer: KubeVirt cannot tell unset from
	// false and lets the preference win.
	if p.PreferredDisableHotplug != nil {
		d.DisableHotplug = *p.PreferredDisableHotplug
	}
	if p.PreferredSoundModel != "" && d.Sound != nil && d.Sound.Model == "" {
		d.Sound.Model = p.PreferredSoundModel
	}
	if p.PreferredRng != nil && d.Rng == nil {
		d.Rng = p.PreferredRng.DeepCopy()
	}
	if p.PreferredTPM != nil && d.TPM == nil {
		d.TPM = p.PreferredTPM.DeepCopy()
	}
	if p.PreferredVideoType != nil {
		if d.Video == nil {
			d.Video = &kubevirtv1.VideoDevice{}
		}
		if d.Video.Type == "" {
			d.Video.Type = *p.PreferredVideoType
		}
	}
	ApplyAutoattachPreferences(pref, spec)
	applyDiskPreferences(p, spec)
	applyInterfacePreferences(p, spec)
	applyInputPreferences(p, spec)
	applyPanicDevicePreferences(p, spec)
}

// ApplyAutoattachPreferences sets the devices' autoattach fields the VMI
// leaves unset (graphics, memory balloon, pod interface, serial console,
// input device) from the preference (kubevirt
// pkg/instancetype/preference/apply/device.go ApplyAutoAttachPreferences;
// KubeVirt's VM controller applies them once more before it adds the
// default network interface).
func ApplyAutoattachPreferences(pref *v1beta1.VirtualMachinePreferenceSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) {
	if pref == nil || pref.Devices == nil {
		return
	}
	p, d := pref.Devices, &spec.Domain.Devices
	setBool(&d.AutoattachGraphicsDevice, p.PreferredAutoattachGraphicsDevice)
	setBool(&d.AutoattachMemBalloon, p.PreferredAutoattachMemBalloon)
	setBool(&d.AutoattachPodInterface, p.PreferredAutoattachPodInterface)
	setBool(&d.AutoattachSerialConsole, p.PreferredAutoattachSerialConsole)
	setBool(&d.AutoattachInputDevice, p.PreferredAutoattachInputDevice)
}

// setBool sets *dst to a copy of pref when pref is set and *dst is not.
func setBool(dst **bool, pref *bool) {
	if pref != nil && *dst == nil {
		v := *pref
		*dst = &v
	}
}

// applyDiskPreferences fills in each disk's unset bus, block size, cache,
// I/O mode and dedicated I/O thread (virtio disks only); a disk with no
// target becomes a disk (kubevirt
// pkg/instancetype/preference/apply/disk.go).
func applyDiskPreferences(p *v1beta1.DevicePreferences, spec *kubevirtv1.VirtualMachineInstanceSpec) {
	for i := range spec.Domain.Devices.Disks {
		disk := &spec.Domain.Devices.Disks[i]
		if disk.Disk == nil && disk.CDRom == nil && disk.LUN == nil {
			disk.Disk = &kubevirtv1.DiskTarget{}
		}
		switch {
		case disk.Disk != nil:
			if p.PreferredDiskBus != "" && disk.Disk.Bus == "" {
				disk.Disk.Bus = p.PreferredDiskBus
			}
			if p.PreferredDiskBlockSize != nil && disk.BlockSize == nil {
				disk.BlockSize = p.PreferredDiskBlockSize.DeepCopy()
			}
			if p.PreferredDiskCache != "" && disk.Cache == "" {
				disk.Cache = p.PreferredDiskCache
			}
			if p.PreferredDiskIO != "" && disk.IO == "" {
				disk.IO = p.PreferredDiskIO
			}
			if p.PreferredDiskDedicatedIoThread != nil && disk.DedicatedIOThread == nil && disk.Disk.Bus == kubevirtv1.DiskBusVirtio {
				v := *p.PreferredDiskDedicatedIoThread
				disk.DedicatedIOThread = &v
			}
		case disk.CDRom != nil:
			if p.PreferredCdromBus != "" && disk.CDRom.Bus == "" {
				disk.CDRom.Bus = p.PreferredCdromBus
			}
		case disk.LUN != nil:
			if p.PreferredLunBus != "" && disk.LUN.Bus == "" {
				disk.LUN.Bus = p.PreferredLunBus
			}
		}
	}
}

// applyInterfacePreferences fills in each interface's unset model, and
// gives an interface on the pod network without a binding the preferred
// masquerade binding (kubevirt
// pkg/instancetype/preference/apply/interface.go).
func applyInterfacePreferences(p *v1beta1.DevicePreferences, spec *kubevirtv1.VirtualMachineInstanceSpec) {
	for i := range spec.Domain.Devices.Interfaces {
		iface := &spec.Domain.Devices.Interfaces[i]
		if p.PreferredInterfaceModel != "" && iface.Model == "" {
			iface.Model = p.PreferredInterfaceModel
		}
		if p.PreferredInterfaceMasquerade != nil && bindingUnset(iface) && onPodNetwork(iface.Name, spec) {
			iface.Masquerade = p.PreferredInterfaceMasquerade.DeepCopy()
		}
	}
}

func bindingUnset(iface *kubevirtv1.Interface) bool {
	return reflect.ValueOf(iface.InterfaceBindingMethod).IsZero() && iface.Binding == nil
}

func onPodNetwork(name string, spec *kubevirtv1.VirtualMachineInstanceSpec) bool {
	for _, n := range spec.Networks {
		if n.Name == name {
			return n.Pod != nil
		}
	}
	return false
}

// applyInputPreferences fills in each input's unset bus and type (kubevirt
// pkg/instancetype/preference/apply/device.go applyInputPreferences).
func applyInputPreferences(p *v1beta1.DevicePreferences, spec *kubevirtv1.VirtualMachineInstanceSpec) {
	for i := range spec.Domain.Devices.Inputs {
		in := &spec.Domain.Devices.Inputs[i]
		if p.PreferredInputBus != "" && in.Bus == "" {
			in.Bus = p.PreferredInputBus
		}
		if p.PreferredInputType != "" && in.Type == "" {
			in.Type = p.PreferredInputType
		}
	}
}

// applyPanicDevicePreferences adds a panic device of the preferred model
// when the VMI has none, else sets the model of those without one (kubevirt
// pkg/instancetype/preference/apply/device.go applyPanicDevicePreferences).
func applyPanicDevicePreferences(p *v1beta1.DevicePreferences, spec *kubevirtv1.VirtualMachineInstanceSpec) {
	if p.PreferredPanicDeviceModel == nil {
		return
	}
	d := &spec.Domain.Devices
	if len(d.PanicDevices) == 0 {
		d.PanicDevices = append(d.PanicDevices, kubevirtv1.PanicDevice{Model: p.PreferredPanicDeviceModel})
		return
	}
	for i := range d.PanicDevices {
		if d.PanicDevices[i].Model == nil {
			d.PanicDevices[i].Model = p.PreferredPanicDeviceModel
		}
	}
}
