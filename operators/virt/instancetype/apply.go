package instancetype

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"
)

// ApplyToVMI takes the path of a VMI spec in its object (spec.template.spec
// for a VM, spec for a VMI), an instancetype spec and a preference spec
// (either nil) and the VMI spec and metadata to expand, as KubeVirt's
// vmiApplier.ApplyToVMI (kubevirt pkg/instancetype/apply/vmi.go): the
// instancetype's node selector, scheduler name, CPU (guest vCPUs laid out
// per the preference's preferredCPUTopology, model, dedicated placement,
// emulator thread, NUMA, realtime, maxSockets), memory (guest, hugepages,
// maxGuest, overcommitPercent as a lower memory request), I/O threads and
// their policy, launch security, GPUs, host devices and annotations are
// set; a field the VMI spec already sets is a Conflict (and nothing of the
// preference is applied). Then the preference fills in only the fields the
// VMI spec leaves unset (ApplyPreference). spec and meta are changed in
// place; the conflicts name paths under base.
func ApplyToVMI(base *field.Path, it *v1beta1.VirtualMachineInstancetypeSpec, pref *v1beta1.VirtualMachinePreferenceSpec,
	spec *kubevirtv1.VirtualMachineInstanceSpec, meta *metav1.ObjectMeta) Conflicts {
	if it == nil && pref == nil {
		return nil
	}
	if it != nil {
		var cs Conflicts
		cs = append(cs, applyNodeSelector(base, it, spec)...)
		cs = append(cs, applySchedulerName(base, it, spec)...)
		cs = append(cs, applyCPU(base, it, pref, spec)...)
		cs = append(cs, applyMemory(base, it, spec)...)
		cs = append(cs, applyIOThreads(base, it, spec)...)
		cs = append(cs, applyIOThreadsPolicy(base, it, spec)...)
		cs = append(cs, applyLaunchSecurity(base, it, spec)...)
		cs = append(cs, applyGPUs(base, it, spec)...)
		cs = append(cs, applyHostDevices(base, it, spec)...)
		cs = append(cs, applyInstancetypeAnnotations(it.Annotations, meta)...)
		if len(cs) > 0 {
			return cs
		}
	}
	ApplyPreference(pref, spec, meta)
	return nil
}
