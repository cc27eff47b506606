package instancetype

import (
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"
)

// applyFeaturePreferences fills in the unset features (kubevirt
// pkg/instancetype/preference/apply/features.go). ACPI is not a pointer:
// KubeVirt cannot tell it unset and lets the preference win.
func applyFeaturePreferences(pref *v1beta1.VirtualMachinePreferenceSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) {
	p := pref.Features
	if p == nil {
		return
	}
	if spec.Domain.Features == nil {
		spec.Domain.Features = &kubevirtv1.Features{}
	}
	f := spec.Domain.Features
	if p.PreferredAcpi != nil {
		f.ACPI = *p.PreferredAcpi.DeepCopy()
	}
	if p.PreferredApic != nil && f.APIC == nil {
		f.APIC = p.PreferredApic.DeepCopy()
	}
	if p.PreferredHyperv != nil {
		applyHypervPreferences(p.PreferredHyperv, f)
	}
	if p.PreferredKvm != nil && f.KVM == nil {
		f.KVM = p.PreferredKvm.DeepCopy()
	}
	if p.PreferredPvspinlock != nil && f.Pvspinlock == nil {
		f.Pvspinlock = p.PreferredPvspinlock.DeepCopy()
	}
	if p.PreferredSmm != nil && f.SMM == nil {
		f.SMM = p.PreferredSmm.DeepCopy()
	}
}

// applyHypervPreferences fills in the unset Hyper-V enlightenments
// (kubevirt pkg/instancetype/preference/apply/features.go
// applyHyperVFeaturePreferences).
func applyHypervPreferences(p *kubevirtv1.FeatureHyperv, f *kubevirtv1.Features) {
	if f.Hyperv == nil {
		f.Hyperv = &kubevirtv1.FeatureHyperv{}
	}
	h := f.Hyperv
	setFeature(&h.EVMCS, p.EVMCS)
	if p.Frequencies != nil && h.Frequencies == nil {
		h.Frequencies = p.Frequencies.DeepCopy()
	}
	setFeature(&h.IPI, p.IPI)
	setFeature(&h.Reenlightenment, p.Reenlightenment)
	setFeature(&h.Relaxed, p.Relaxed)
	setFeature(&h.Reset, p.Reset)
	setFeature(&h.Runtime, p.Runtime)
	if p.Spinlocks != nil && h.Spinlocks == nil {
		h.Spinlocks = p.Spinlocks.DeepCopy()
	}
	if p.SyNIC != nil && h.SyNIC == nil {
		h.SyNIC = p.SyNIC.DeepCopy()
	}
	if p.SyNICTimer != nil && h.SyNICTimer == nil {
		h.SyNICTimer = p.SyNICTimer.DeepCopy()
	}
	if p.TLBFlush != nil && h.TLBFlush == nil {
		h.TLBFlush = p.TLBFlush.DeepCopy()
	}
	setFeature(&h.VAPIC, p.VAPIC)
	setFeature(&h.VPIndex, p.VPIndex)
	if p.VendorID != nil && h.VendorID == nil {
		h.VendorID = p.VendorID.DeepCopy()
	}
}

// setFeature sets *dst to a copy of pref when pref is set and *dst is not.
func setFeature(dst **kubevirtv1.FeatureState, pref *kubevirtv1.FeatureState) {
	if pref != nil && *dst == nil {
		*dst = pref.DeepCopy()
	}
}

// applyFirmwarePreferences fills in the bootloader (kubevirt
// pkg/instancetype/preference/apply/firmware.go): BIOS when preferred and
// the VMI names no bootloader, its serial console, then the preferred EFI
// (which ends the firmware preferences), else the deprecated
// preferredUseEfi and preferredUseSecureBoot.
func applyFirmwarePreferences(pref *v1beta1.VirtualMachinePreferenceSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) {
	p := pref.Firmware
	if p == nil {
		return
	}
	if spec.Domain.Firmware == nil {
		spec.Domain.Firmware = &kubevirtv1.Firmware{}
	}
	fw := spec.Domain.Firmware
	if fw.Bootloader == nil {
		fw.Bootloader = &kubevirtv1.Bootloader{}
	}
	bl := fw.Bootloader
	if p.PreferredUseBios != nil && *p.PreferredUseBios && bl.BIOS == nil && bl.EFI == nil {
		bl.BIOS = &kubevirtv1.BIOS{}
	}
	if p.PreferredUseBiosSerial != nil && bl.BIOS != nil && bl.BIOS.UseSerial == nil {
		v := *p.PreferredUseBiosSerial
		bl.BIOS.UseSerial = &v
	}
	if bl.EFI == nil && bl.BIOS == nil && p.PreferredEfi != nil {
		bl.EFI = p.PreferredEfi.DeepCopy()
		return
	}
	if p.DeprecatedPreferredUseEfi != nil && *p.DeprecatedPreferredUseEfi && bl.EFI == nil && bl.BIOS == nil {
		bl.EFI = &kubevirtv1.EFI{}
	}
	if p.DeprecatedPreferredUseSecureBoot != nil && bl.EFI != nil && bl.EFI.SecureBoot == nil {
		v := *p.DeprecatedPreferredUseSecureBoot
		bl.EFI.SecureBoot = &v
	}
}

// applyMachinePreferences sets the machine type when the VMI sets none
// (kubevirt pkg/instancetype/preference/apply/machine.go).
func applyMachinePreferences(pref *v1beta1.VirtualMachinePreferenceSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) {
	if pref.Machine == nil || pref.Machine.PreferredMachineType == "" {
		return
	}
	if spec.Domain.Machine == nil {
		spec.Domain.Machine = &kubevirtv1.Machine{}
	}
	if spec.Domain.Machine.Type == "" {
		spec.Domain.Machine.Type = pref.Machine.PreferredMachineType
	}
}

// applyClockPreferences sets the clock offset when the VMI sets neither
// utc nor timezone, and the timers when it sets none (kubevirt
// pkg/instancetype/preference/apply/clock.go).
func applyClockPreferences(pref *v1beta1.VirtualMachinePreferenceSpec, spec *kubevirtv1.VirtualMachineInstanceSpec) {
	p := pref.Clock
	if p == nil {
		return
	}
	if spec.Domain.Clock == nil {
		spec.Domain.Clock = &kubevirtv1.Clock{}
	}
	c := spec.Domain.Clock
	if p.PreferredClockOffset != nil && c.UTC == nil && c.Timezone == nil {
		c.ClockOffset = *p.PreferredClockOffset.DeepCopy()
	}
	if p.PreferredTimer != nil && c.Timer == nil {
		c.Timer = p.PreferredTimer.DeepCopy()
	}
}
