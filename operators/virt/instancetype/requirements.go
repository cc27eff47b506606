package instancetype

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"
)

// RequirementsFailedPrefix is what virt-api puts before a requirement's
// message when it refuses a VM (kubevirt
// pkg/virt-api/webhooks/validating-webhook/admitters/vms-admitter.go).
const RequirementsFailedPrefix = "failure checking preference requirements: "

// KubeVirt's messages for a preference's requirements not met (kubevirt
// pkg/instancetype/preference/requirements/cpu.go, memory.go, arch.go).
const (
	insufficientInstancetypeCPUFmt    = "insufficient CPU resources of %d vCPU provided by instance type, preference requires %d vCPU"
	insufficientVMCPUFmt              = "insufficient CPU resources of %d vCPU provided by VirtualMachine, preference requires %d vCPU provided as %s"
	insufficientInstancetypeMemoryFmt = "insufficient Memory resources of %s provided by instance type, preference requires %s"
	insufficientVMMemoryFmt           = "insufficient Memory resources of %s provided by VirtualMachine, preference requires %s"
	requiredArchitectureFmt           = "preference requires architecture %s but %s is being requested"
)

// defaultArchitecture is the architecture of a VMI that names none
// (KubeVirt's default on amd64 control planes; converge runs amd64 only).
const defaultArchitecture = "amd64"

// CheckRequirements checks the preference's requirements (vCPUs, guest
// memory, architecture) against the instancetype, or, without one, the
// VM's template spec once defaulted as virt-api defaults it (guest memory
// from the memory request or limit, sockets from the CPU limit or request,
// architecture amd64); it gives nil, or the fields that fall short (paths
// from the VM's root: spec.instancetype, spec.template.spec.domain.cpu.*,
// .memory, .architecture) and KubeVirt's message (kubevirt
// pkg/instancetype/preference/requirements/checker.go Check).
func CheckRequirements(it *v1beta1.VirtualMachineInstancetypeSpec, pref *v1beta1.VirtualMachinePreferenceSpec,
	spec *kubevirtv1.VirtualMachineInstanceSpec) (Conflicts, error) {
	if pref == nil || pref.Requirements == nil {
		return nil, nil
	}
	spec = requirementDefaults(spec)
	req := pref.Requirements
	if req.CPU != nil {
		if cs, err := checkCPU(it, pref, spec); err != nil {
			return cs, err
		}
	}
	if req.Memory != nil {
		if cs, err := checkMemory(it, req.Memory, spec); err != nil {
			return cs, err
		}
	}
	if req.Architecture != nil && spec.Architecture != *req.Architecture {
		return Conflicts{{Path: field.NewPath("spec", "template", "spec", "architecture")}},
			fmt.Errorf(requiredArchitectureFmt, *req.Architecture, spec.Architecture)
	}
	return nil, nil
}

// requirementDefaults gives a copy of spec with the defaults virt-api sets
// before it checks requirements that matter to them (kubevirt
// pkg/defaults/defaults.go setGuestMemory, SetDefaultGuestCPUTopology,
// setDefaultArchitecture).
func requirementDefaults(spec *kubevirtv1.VirtualMachineInstanceSpec) *kubevirtv1.VirtualMachineInstanceSpec {
	spec = spec.DeepCopy()
	if spec.Architecture == "" {
		spec.Architecture = defaultArchitecture
	}
	res := spec.Domain.Resources
	if spec.Domain.Memory == nil || spec.Domain.Memory.Guest == nil {
		if spec.Domain.Memory == nil {
			spec.Domain.Memory = &kubevirtv1.Memory{}
		}
		switch {
		case !res.Requests.Memory().IsZero():
			spec.Domain.Memory.Guest = res.Requests.Memory()
		case !res.Limits.Memory().IsZero():
			spec.Domain.Memory.Guest = res.Limits.Memory()
		}
	}
	if c := spec.Domain.CPU; c == nil || (c.Cores == 0 && c.Sockets == 0 && c.Threads == 0) {
		if spec.Domain.CPU == nil {
			spec.Domain.CPU = &kubevirtv1.CPU{}
		}
		sockets := uint32(1)
		if q, ok := res.Limits[corev1.ResourceCPU]; ok {
			sockets = uint32(q.Value())
		} else if q, ok := res.Requests[corev1.ResourceCPU]; ok {
			sockets = uint32(q.Value())
		}
		spec.Domain.CPU.Sockets, spec.Domain.CPU.Cores, spec.Domain.CPU.Threads = sockets, 1, 1
	}
	return spec
}

// checkCPU is KubeVirt's requirements/cpu.go checkCPU and checkSpread.
func checkCPU(it *v1beta1.VirtualMachineInstancetypeSpec, pref *v1beta1.VirtualMachinePreferenceSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) (Conflicts, error) {
	want := pref.Requirements.CPU.Guest
	if it != nil {
		if it.CPU.Guest < want {
			return Conflicts{{Path: field.NewPath("spec", "instancetype")}}, fmt.Errorf(insufficientInstancetypeCPUFmt, it.CPU.Guest, want)
		}
		return nil, nil
	}
	base := field.NewPath("spec", "template", "spec", "domain", "cpu")
	cpu := spec.Domain.CPU
	short := func(have uint32, as string, names ...string) (Conflicts, error) {
		if have >= want {
			return nil, nil
		}
		cs := make(Conflicts, len(names))
		for i, n := range names {
			cs[i] = &Conflict{Path: base.Child(n)}
		}
		return cs, fmt.Errorf(insufficientVMCPUFmt, have, want, as)
	}
	switch PreferredCPUTopology(pref) {
	case v1beta1.DeprecatedPreferThreads, v1beta1.Threads:
		return short(cpu.Threads, "threads", "threads")
	case v1beta1.DeprecatedPreferCores, v1beta1.Cores:
		return short(cpu.Cores, "cores", "cores")
	case v1beta1.DeprecatedPreferSockets, v1beta1.Sockets:
		return short(cpu.Sockets, "sockets", "sockets")
	case v1beta1.DeprecatedPreferSpread, v1beta1.Spread:
		_, across := SpreadOptions(pref)
		switch across {
		case v1beta1.SpreadAcrossSocketsCores:
			return short(cpu.Sockets*cpu.Cores, string(across), "sockets", "cores")
		case v1beta1.SpreadAcrossCoresThreads:
			return short(cpu.Cores*cpu.Threads, string(across), "cores", "threads")
		case v1beta1.SpreadAcrossSocketsCoresThreads:
			return short(cpu.Sockets*cpu.Cores*cpu.Threads, string(across), "sockets", "cores", "threads")
		}
	case v1beta1.DeprecatedPreferAny, v1beta1.Any:
		return short(cpu.Cores*cpu.Sockets*cpu.Threads, "cores, sockets and threads", "cores", "sockets", "threads")
	}
	return nil, nil
}

// checkMemory is KubeVirt's requirements/memory.go checkMemory: the VM's
// guest memory, else the instancetype's, against the requirement.
func checkMemory(it *v1beta1.VirtualMachineInstancetypeSpec, req *v1beta1.MemoryPreferenceRequirement, spec *kubevirtv1.VirtualMachineInstanceSpec) (Conflicts, error) {
	path, format := field.NewPath("spec", "template", "spec", "domain", "memory"), insufficientVMMemoryFmt
	have := resource.MustParse("0Mi")
	if it != nil {
		path, format, have = field.NewPath("spec", "instancetype"), insufficientInstancetypeMemoryFmt, it.Memory.Guest
	}
	if spec.Domain.Memory != nil && spec.Domain.Memory.Guest != nil {
		have = *spec.Domain.Memory.Guest
	}
	if have.Cmp(req.Guest) < 0 {
		return Conflicts{{Path: path}}, fmt.Errorf(format, have.String(), req.Guest.String())
	}
	return nil, nil
}
