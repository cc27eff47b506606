package instancetype

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"
)

// applyCPU sets the instancetype's CPU in spec unless spec sets CPU
// requests or limits, a topology, or a field the instancetype sets too
// (kubevirt pkg/instancetype/apply/cpu.go applyCPU, validateCPU).
func applyCPU(base *field.Path, it *v1beta1.VirtualMachineInstancetypeSpec, pref *v1beta1.VirtualMachinePreferenceSpec,
	spec *kubevirtv1.VirtualMachineInstanceSpec) Conflicts {
	if spec.Domain.CPU == nil {
		spec.Domain.CPU = &kubevirtv1.CPU{}
	}
	if cs := cpuConflicts(base, it, spec); len(cs) > 0 {
		return cs
	}
	cpu := spec.Domain.CPU
	if it.CPU.Model != nil {
		cpu.Model = *it.CPU.Model
	}
	if it.CPU.DedicatedCPUPlacement != nil {
		cpu.DedicatedCPUPlacement = *it.CPU.DedicatedCPUPlacement
	}
	if it.CPU.IsolateEmulatorThread != nil {
		cpu.IsolateEmulatorThread = *it.CPU.IsolateEmulatorThread
	}
	if it.CPU.NUMA != nil {
		cpu.NUMA = it.CPU.NUMA.DeepCopy()
	}
	if it.CPU.Realtime != nil {
		cpu.Realtime = it.CPU.Realtime.DeepCopy()
	}
	if it.CPU.MaxSockets != nil {
		cpu.MaxSockets = *it.CPU.MaxSockets
	}
	cpu.Sockets, cpu.Cores, cpu.Threads = GuestCPUTopology(it.CPU.Guest, pref)
	return nil
}

// GuestCPUTopology lays vCPUs out as sockets, cores and threads per the
// preference's preferredCPUTopology (pref may be nil), as KubeVirt's
// applyGuestCPUTopology (kubevirt pkg/instancetype/apply/cpu.go): one
// vCPU, or none, is 1/1/1; sockets (the default, also for any), cores or
// threads take them all; spread divides them by the spread ratio (default
// 2) across sockets and cores (the default), cores and threads, or
// sockets, cores and 2 threads per core.
func GuestCPUTopology(vCPUs uint32, pref *v1beta1.VirtualMachinePreferenceSpec) (sockets, cores, threads uint32) {
	sockets, cores, threads = 1, 1, 1
	if vCPUs == 1 {
		return
	}
	switch PreferredCPUTopology(pref) {
	case v1beta1.DeprecatedPreferCores, v1beta1.Cores:
		cores = vCPUs
	case v1beta1.DeprecatedPreferSockets, v1beta1.DeprecatedPreferAny, v1beta1.Sockets, v1beta1.Any:
		sockets = vCPUs
	case v1beta1.DeprecatedPreferThreads, v1beta1.Threads:
		threads = vCPUs
	case v1beta1.DeprecatedPreferSpread, v1beta1.Spread:
		ratio, across := SpreadOptions(pref)
		switch across {
		case v1beta1.SpreadAcrossSocketsCores:
			cores, sockets = ratio, vCPUs/ratio
		case v1beta1.SpreadAcrossCoresThreads:
			threads, cores = ratio, vCPUs/ratio
		case v1beta1.SpreadAcrossSocketsCoresThreads:
			const threadsPerCore = 2
			threads, cores, sockets = threadsPerCore, ratio, vCPUs/threadsPerCore/ratio
		}
	}
	return
}

// cpuConflicts gives the CPU fields of spec the instancetype conflicts
// with (kubevirt pkg/instancetype/apply/cpu.go validateCPU).
func cpuConflicts(base *field.Path, it *v1beta1.VirtualMachineInstancetypeSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) Conflicts {
	var cs Conflicts
	if _, ok := spec.Domain.Resources.Requests[corev1.ResourceCPU]; ok {
		cs = append(cs, child(base, "domain", "resources", "requests", string(corev1.ResourceCPU)))
	}
	if _, ok := spec.Domain.Resources.Limits[corev1.ResourceCPU]; ok {
		cs = append(cs, child(base, "domain", "resources", "limits", string(corev1.ResourceCPU)))
	}
	cpu := spec.Domain.CPU
	if cpu.Sockets != 0 {
		cs = append(cs, child(base, "domain", "cpu", "sockets"))
	}
	if cpu.Cores != 0 {
		cs = append(cs, child(base, "domain", "cpu", "cores"))
	}
	if cpu.Threads != 0 {
		cs = append(cs, child(base, "domain", "cpu", "threads"))
	}
	if cpu.Model != "" && it.CPU.Model != nil {
		cs = append(cs, child(base, "domain", "cpu", "model"))
	}
	if cpu.DedicatedCPUPlacement && it.CPU.DedicatedCPUPlacement != nil {
		cs = append(cs, child(base, "domain", "cpu", "dedicatedCPUPlacement"))
	}
	if cpu.IsolateEmulatorThread && it.CPU.IsolateEmulatorThread != nil {
		cs = append(cs, child(base, "domain", "cpu", "isolateEmulatorThread"))
	}
	if cpu.NUMA != nil && it.CPU.NUMA != nil {
		cs = append(cs, child(base, "domain", "cpu", "numa"))
	}
	if cpu.Realtime != nil && it.CPU.Realtime != nil {
		cs = append(cs, child(base, "domain", "cpu", "realtime"))
	}
	return cs
}
