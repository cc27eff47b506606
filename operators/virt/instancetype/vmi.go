package instancetype

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// ApplyToNewVMI expands the instancetype and preference vm uses (f finds
// them: their revisions once Store recorded them) into vmi, the VMI the
// VM controller is about to create from vm's template, as KubeVirt's VM
// controller (kubevirt pkg/instancetype/controller/vm/controller.go
// ApplyAutoAttachPreferences and ApplyToVMI, called by
// pkg/virt-controller/watch/vm/vm.go startVMI): the preference's
// autoattach fields, the default NIC when the preference would change it
// (AddDefaultPodInterface), the annotations naming the instancetype and
// preference (kubevirt.io/[cluster-]instancetype-name,
// kubevirt.io/[cluster-]preference-name), then ApplyToVMI at the VMI's
// spec. A VM naming neither is left alone. The error is the finder's, or
// KubeVirt's for conflicts ("VMI conflicts with instancetype spec in
// fields: [spec.domain.cpu.sockets]").
func (f Finder) ApplyToNewVMI(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) error {
	if vm.Spec.Instancetype == nil && vm.Spec.Preference == nil {
		return nil
	}
	pref, err := f.Preference(ctx, vm)
	if err != nil {
		return err
	}
	ApplyAutoattachPreferences(pref, &vmi.Spec)
	AddDefaultPodInterface(pref, &vmi.Spec)
	it, err := f.Instancetype(ctx, vm)
	if err != nil {
		return err
	}
	if it == nil && pref == nil {
		return nil
	}
	SetAnnotations(vm, vmi)
	if cs := ApplyToVMI(field.NewPath("spec"), it, pref, &vmi.Spec, &vmi.ObjectMeta); len(cs) > 0 {
		return fmt.Errorf("VMI conflicts with instancetype spec in fields: [%s]", cs.String())
	}
	return nil
}

// SetAnnotations puts on vmi the annotations naming the instancetype and
// preference vm uses, by kind (kubevirt pkg/instancetype/annotations/
// annotations.go, preference/annotations/annotations.go Set).
func SetAnnotations(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) {
	if vmi.Annotations == nil {
		vmi.Annotations = map[string]string{}
	}
	if m := vm.Spec.Instancetype; m != nil {
		if _, namespaced, err := InstancetypeKind(m.Kind); err == nil {
			key := kubevirtv1.ClusterInstancetypeAnnotation
			if namespaced {
				key = kubevirtv1.InstancetypeAnnotation
			}
			vmi.Annotations[key] = m.Name
		}
	}
	if m := vm.Spec.Preference; m != nil {
		if _, namespaced, err := PreferenceKind(m.Kind); err == nil {
			key := kubevirtv1.ClusterPreferenceAnnotation
			if namespaced {
				key = kubevirtv1.PreferenceAnnotation
			}
			vmi.Annotations[key] = m.Name
		}
	}
}
