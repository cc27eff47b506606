package instancetype

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"kubevirt.io/api/instancetype/v1beta1"
)

// KubeVirt's messages for an instancetype whose vCPUs the preference's
// spread topology cannot divide (kubevirt
// pkg/instancetype/preference/validation/cpu.go).
const (
	instancetypeCPUGuestPath       = "instancetype.spec.cpu.guest"
	spreadAcrossSocketsCoresErrFmt = "%d vCPUs provided by the instance type are not divisible by the " +
		"Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of %d provided by the preference"
	spreadAcrossCoresThreadsErrFmt        = "%d vCPUs provided by the instance type are not divisible by the number of threads per core %d"
	spreadAcrossSocketsCoresThreadsErrFmt = "%d vCPUs provided by the instance type are not divisible by the number of threads per core " +
		"%d and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of %d"
)

// CheckSpreadCPUTopology gives a Conflict at instancetype.spec.cpu.guest
// when the preference spreads the instancetype's vCPUs (topology spread)
// and its ratio (and 2 threads per core, across SocketsCoresThreads) does
// not divide them, with KubeVirt's message; nil otherwise (kubevirt
// pkg/instancetype/preference/validation/cpu.go CheckSpreadCPUTopology).
func CheckSpreadCPUTopology(it *v1beta1.VirtualMachineInstancetypeSpec, pref *v1beta1.VirtualMachinePreferenceSpec) *Conflict {
	topology := PreferredCPUTopology(pref)
	if it == nil || (topology != v1beta1.Spread && topology != v1beta1.DeprecatedPreferSpread) {
		return nil
	}
	ratio, across := SpreadOptions(pref)
	guest := it.CPU.Guest
	var msg string
	switch across {
	case v1beta1.SpreadAcrossSocketsCores:
		if ratio == 0 || guest%ratio > 0 {
			msg = fmt.Sprintf(spreadAcrossSocketsCoresErrFmt, guest, ratio)
		}
	case v1beta1.SpreadAcrossCoresThreads:
		if ratio == 0 || guest%ratio > 0 {
			msg = fmt.Sprintf(spreadAcrossCoresThreadsErrFmt, guest, ratio)
		}
	case v1beta1.SpreadAcrossSocketsCoresThreads:
		const threadsPerCore = 2
		if ratio == 0 || guest%threadsPerCore > 0 || (guest/threadsPerCore)%ratio > 0 {
			msg = fmt.Sprintf(spreadAcrossSocketsCoresThreadsErrFmt, guest, threadsPerCore, ratio)
		}
	}
	if msg == "" {
		return nil
	}
	return &Conflict{Path: field.NewPath(instancetypeCPUGuestPath), Message: msg}
}
