package instancetype

import (
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"
)

// AddDefaultPodInterface gives spec KubeVirt's default NIC — the interface
// "default" with the masquerade binding on the pod network "default"
// (kubevirt.io/api core/v1 DefaultMasqueradeNetworkInterface,
// DefaultPodNetwork) — when the preference pref sets how interfaces are
// modelled or bound (preferredInterfaceModel, preferredInterfaceMasquerade)
// and spec would get that default: it declares no interface and no
// network and does not set autoattachPodInterface to false. It reports
// whether it added one.
//
// KubeVirt's VM controller adds the default NIC to every VMI it creates
// before it applies the preference, so that the preference reaches it
// (kubevirt pkg/virt-controller/watch/vm/vm.go startVMI:
// SetDefaultNetworkInterface, then ApplyToVMI; pkg/network/vmispec/
// defaults.go). converge's node agent adds it otherwise
// (nodeplane/vm/domain PodInterfaceDefault), after the expansion, where
// the preference is out of reach; so, for a preference that would change
// it, the default is written into the VMI here.
func AddDefaultPodInterface(pref *v1beta1.VirtualMachinePreferenceSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) bool {
	if pref == nil || pref.Devices == nil || (pref.Devices.PreferredInterfaceModel == "" && pref.Devices.PreferredInterfaceMasquerade == nil) {
		return false
	}
	d := &spec.Domain.Devices
	if a := d.AutoattachPodInterface; a != nil && !*a {
		return false
	}
	if len(d.Interfaces) > 0 || len(spec.Networks) > 0 {
		return false
	}
	d.Interfaces = []kubevirtv1.Interface{*kubevirtv1.DefaultMasqueradeNetworkInterface()}
	spec.Networks = []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()}
	return true
}
