package instancetype

import (
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"
)

// The instancetype's other fields, each set unless spec sets it already
// (a Conflict), as KubeVirt pkg/instancetype/apply/ nodeselector.go,
// scheduler.go, iothreads.go, iothreadpolicy.go, launchsecurity.go,
// gpu.go, hostdevices.go and annotations.go.

func applyNodeSelector(base *field.Path, it *v1beta1.VirtualMachineInstancetypeSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) Conflicts {
	if it.NodeSelector == nil {
		return nil
	}
	if spec.NodeSelector != nil {
		return Conflicts{child(base, "nodeSelector")}
	}
	spec.NodeSelector = maps.Clone(it.NodeSelector)
	return nil
}

func applySchedulerName(base *field.Path, it *v1beta1.VirtualMachineInstancetypeSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) Conflicts {
	if it.SchedulerName == "" {
		return nil
	}
	if spec.SchedulerName != "" {
		return Conflicts{child(base, "schedulerName")}
	}
	spec.SchedulerName = it.SchedulerName
	return nil
}

func applyIOThreads(base *field.Path, it *v1beta1.VirtualMachineInstancetypeSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) Conflicts {
	if it.IOThreads == nil || it.IOThreads.SupplementalPoolThreadCount == nil {
		return nil
	}
	if spec.Domain.IOThreads != nil && spec.Domain.IOThreads.SupplementalPoolThreadCount != nil {
		return Conflicts{child(base, "domain", "ioThreads", "supplementalPoolThreadCount")}
	}
	if spec.Domain.IOThreads == nil {
		spec.Domain.IOThreads = &kubevirtv1.DiskIOThreads{}
	}
	n := *it.IOThreads.SupplementalPoolThreadCount
	spec.Domain.IOThreads.SupplementalPoolThreadCount = &n
	return nil
}

func applyIOThreadsPolicy(base *field.Path, it *v1beta1.VirtualMachineInstancetypeSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) Conflicts {
	if it.IOThreadsPolicy == nil {
		return nil
	}
	if spec.Domain.IOThreadsPolicy != nil {
		return Conflicts{child(base, "domain", "ioThreadsPolicy")}
	}
	p := *it.IOThreadsPolicy
	spec.Domain.IOThreadsPolicy = &p
	return nil
}

func applyLaunchSecurity(base *field.Path, it *v1beta1.VirtualMachineInstancetypeSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) Conflicts {
	if it.LaunchSecurity == nil {
		return nil
	}
	if spec.Domain.LaunchSecurity != nil {
		return Conflicts{child(base, "domain", "launchSecurity")}
	}
	spec.Domain.LaunchSecurity = it.LaunchSecurity.DeepCopy()
	return nil
}

func applyGPUs(base *field.Path, it *v1beta1.VirtualMachineInstancetypeSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) Conflicts {
	if len(it.GPUs) == 0 {
		return nil
	}
	if len(spec.Domain.Devices.GPUs) > 0 {
		return Conflicts{child(base, "domain", "devices", "gpus")}
	}
	spec.Domain.Devices.GPUs = make([]kubevirtv1.GPU, len(it.GPUs))
	for i := range it.GPUs {
		it.GPUs[i].DeepCopyInto(&spec.Domain.Devices.GPUs[i])
	}
	return nil
}

func applyHostDevices(base *field.Path, it *v1beta1.VirtualMachineInstancetypeSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) Conflicts {
	if len(it.HostDevices) == 0 {
		return nil
	}
	if len(spec.Domain.Devices.HostDevices) > 0 {
		return Conflicts{child(base, "domain", "devices", "hostDevices")}
	}
	spec.Domain.Devices.HostDevices = make([]kubevirtv1.HostDevice, len(it.HostDevices))
	for i := range it.HostDevices {
		it.HostDevices[i].DeepCopyInto(&spec.Domain.Devices.HostDevices[i])
	}
	return nil
}

// applyInstancetypeAnnotations adds the instancetype's annotations to meta;
// one meta has with another value is a conflict at annotations.<key> (from
// the root, as KubeVirt's conflict.New("annotations", key)).
func applyInstancetypeAnnotations(annotations map[string]string, meta *metav1.ObjectMeta) Conflicts {
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	var cs Conflicts
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		if v, ok := meta.Annotations[k]; ok {
			if v != annotations[k] {
				cs = append(cs, &Conflict{Path: field.NewPath("annotations", k)})
			}
			continue
		}
		meta.Annotations[k] = annotations[k]
	}
	return cs
}
