package instancetype

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"
)

// applyMemory sets the instancetype's memory in spec: the guest memory,
// with overcommitPercent a memory request that much lower, hugepages and
// maxGuest; unless spec sets the guest memory, memory requests or limits,
// or hugepages or maxGuest the instancetype sets too (kubevirt
// pkg/instancetype/apply/memory.go applyMemory, validateMemory: one
// conflict at most).
func applyMemory(base *field.Path, it *v1beta1.VirtualMachineInstancetypeSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) Conflicts {
	if spec.Domain.Memory == nil {
		spec.Domain.Memory = &kubevirtv1.Memory{}
	}
	if c := memoryConflict(base, it, spec); c != nil {
		return Conflicts{c}
	}
	guest := it.Memory.Guest.DeepCopy()
	spec.Domain.Memory.Guest = &guest
	const totalPercentage = 100
	if over := it.Memory.OvercommitPercent; over > 0 {
		if spec.Domain.Resources.Requests == nil {
			spec.Domain.Resources.Requests = corev1.ResourceList{}
		}
		// KubeVirt computes it in float32; so does this, to request the same.
		request := int64(float32(guest.Value()) * (1 - float32(over)/totalPercentage))
		spec.Domain.Resources.Requests[corev1.ResourceMemory] = *resource.NewQuantity(request, guest.Format)
	}
	if it.Memory.Hugepages != nil {
		spec.Domain.Memory.Hugepages = it.Memory.Hugepages.DeepCopy()
	}
	if it.Memory.MaxGuest != nil {
		m := it.Memory.MaxGuest.DeepCopy()
		spec.Domain.Memory.MaxGuest = &m
	}
	return nil
}

// memoryConflict gives the first memory field of spec the instancetype
// conflicts with, or nil (kubevirt pkg/instancetype/apply/memory.go
// validateMemory).
func memoryConflict(base *field.Path, it *v1beta1.VirtualMachineInstancetypeSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) *Conflict {
	m := spec.Domain.Memory
	switch {
	case m.Guest != nil:
		return child(base, "domain", "memory", "guest")
	case m.Hugepages != nil && it.Memory.Hugepages != nil:
		return child(base, "domain", "memory", "hugepages")
	case m.MaxGuest != nil && it.Memory.MaxGuest != nil:
		return child(base, "domain", "memory", "maxGuest")
	}
	if _, ok := spec.Domain.Resources.Requests[corev1.ResourceMemory]; ok {
		return child(base, "domain", "resources", "requests", string(corev1.ResourceMemory))
	}
	if _, ok := spec.Domain.Resources.Limits[corev1.ResourceMemory]; ok {
		return child(base, "domain", "resources", "limits", string(corev1.ResourceMemory))
	}
	return nil
}
