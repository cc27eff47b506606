package instancetype

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"
)

// ApplyPreference fills in, from the preference spec pref (nil: nothing),
// the fields of the VMI spec and metadata that they leave unset, in
// KubeVirt's order (kubevirt pkg/instancetype/preference/apply/vmi.go
// Apply): preferred CPU features, devices (disk, CD-ROM and LUN buses,
// disk cache, I/O, block size and dedicated I/O thread, interface model
// and masquerade binding on the pod network, input bus and type, panic
// device, RNG, TPM, video, sound, autoattach, multiqueue, virtio
// transitional, hotplug), features, firmware, machine type, clock,
// subdomain, termination grace period, architecture, annotations and
// launch security. Where KubeVirt cannot tell unset from false
// (features.acpi, devices.disableHotplug) the preference wins, as there.
func ApplyPreference(pref *v1beta1.VirtualMachinePreferenceSpec, spec *kubevirtv1.VirtualMachineInstanceSpec, meta *metav1.ObjectMeta) {
	if pref == nil {
		return
	}
	applyCPUPreferences(pref, spec)
	applyDevicePreferences(pref, spec)
	applyFeaturePreferences(pref, spec)
	applyFirmwarePreferences(pref, spec)
	applyMachinePreferences(pref, spec)
	applyClockPreferences(pref, spec)
	if spec.Subdomain == "" && pref.PreferredSubdomain != nil {
		spec.Subdomain = *pref.PreferredSubdomain
	}
	if pref.PreferredTerminationGracePeriodSeconds != nil && spec.TerminationGracePeriodSeconds == nil {
		s := *pref.PreferredTerminationGracePeriodSeconds
		spec.TerminationGracePeriodSeconds = &s
	}
	ApplyArchitecturePreference(pref, spec)
	applyPreferenceAnnotations(pref.Annotations, meta)
	if pref.PreferredLaunchSecurity != nil && spec.Domain.LaunchSecurity == nil {
		spec.Domain.LaunchSecurity = pref.PreferredLaunchSecurity.DeepCopy()
	}
}

// PreferredCPUTopology gives the preference's preferredCPUTopology, sockets
// when pref or the field is unset (kubevirt
// pkg/instancetype/preference/apply/cpu.go GetPreferredTopology).
func PreferredCPUTopology(pref *v1beta1.VirtualMachinePreferenceSpec) v1beta1.PreferredCPUTopology {
	if pref != nil && pref.CPU != nil && pref.CPU.PreferredCPUTopology != nil {
		return *pref.CPU.PreferredCPUTopology
	}
	return v1beta1.Sockets
}

// defaultSpreadRatio is KubeVirt's spread ratio when the preference sets
// none.
const defaultSpreadRatio uint32 = 2

// SpreadOptions gives the preference's spread ratio (cpu.spreadOptions.ratio,
// else the deprecated preferSpreadSocketToCoreRatio, else 2) and what to
// spread across (cpu.spreadOptions.across, else SocketsCores), as KubeVirt
// pkg/instancetype/preference/apply/cpu.go GetSpreadOptions.
func SpreadOptions(pref *v1beta1.VirtualMachinePreferenceSpec) (uint32, v1beta1.SpreadAcross) {
	ratio := defaultSpreadRatio
	across := v1beta1.SpreadAcrossSocketsCores
	if pref == nil {
		return ratio, across
	}
	if pref.PreferSpreadSocketToCoreRatio != 0 {
		ratio = pref.PreferSpreadSocketToCoreRatio
	}
	if pref.CPU != nil && pref.CPU.SpreadOptions != nil {
		if pref.CPU.SpreadOptions.Across != nil {
			across = *pref.CPU.SpreadOptions.Across
		}
		if pref.CPU.SpreadOptions.Ratio != nil {
			ratio = *pref.CPU.SpreadOptions.Ratio
		}
	}
	return ratio, across
}

// applyCPUPreferences adds the preferred CPU features the VMI does not
// name (kubevirt pkg/instancetype/preference/apply/cpu.go).
func applyCPUPreferences(pref *v1beta1.VirtualMachinePreferenceSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) {
	if pref.CPU == nil || len(pref.CPU.PreferredCPUFeatures) == 0 {
		return
	}
	if spec.Domain.CPU == nil {
		spec.Domain.CPU = &kubevirtv1.CPU{}
	}
	named := map[string]bool{}
	for _, f := range spec.Domain.CPU.Features {
		named[f.Name] = true
	}
	for _, f := range pref.CPU.PreferredCPUFeatures {
		if !named[f.Name] {
			spec.Domain.CPU.Features = append(spec.Domain.CPU.Features, f)
		}
	}
}

// ApplyArchitecturePreference sets spec.architecture from the preference
// when spec leaves it empty (kubevirt
// pkg/instancetype/preference/apply/architecture.go).
func ApplyArchitecturePreference(pref *v1beta1.VirtualMachinePreferenceSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) {
	if pref == nil || pref.PreferredArchitecture == nil || *pref.PreferredArchitecture == "" {
		return
	}
	if spec.Architecture == "" {
		spec.Architecture = *pref.PreferredArchitecture
	}
}

// applyPreferenceAnnotations adds the preference's annotations meta does
// not have (kubevirt pkg/instancetype/preference/apply/annotations.go).
func applyPreferenceAnnotations(annotations map[string]string, meta *metav1.ObjectMeta) {
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		if _, ok := meta.Annotations[k]; !ok {
			meta.Annotations[k] = v
		}
	}
}
