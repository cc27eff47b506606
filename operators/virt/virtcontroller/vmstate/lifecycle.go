package vmstate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Change is what one of KubeVirt's lifecycle subresources
// (subresources.kubevirt.io virtualmachines/start, stop, restart) writes,
// as JSON patches (RFC 6902) that test the values they replace, so that a
// concurrent change makes them fail instead of being overwritten. They are
// applied in this order, each only when not nil: VMI to the
// VirtualMachineInstance, Spec to the VirtualMachine, Status to its status
// subresource.
type Change struct {
	VMI, Spec, Status []byte
}

// KubeVirt's words (kubevirt pkg/virt-api/rest/subresource.go, lifecycle.go).
const (
	// VMNotRunning refuses a stop or restart of a VM without a running VMI.
	VMNotRunning = "VM is not running"
	// VMAlreadyRunning refuses a start of a VM whose VMI runs.
	VMAlreadyRunning = "VM is already running"
	// ChangeUnderway refuses a change while earlier state change requests
	// are pending (KubeVirt answers it with 500).
	ChangeUnderway = "unable to complete request: stop/start already underway"
	// ManualRecoveryRequired refuses a start or restart after a failed
	// volume migration.
	ManualRecoveryRequired = "VM recovery required: Volume migration failed, leaving some volumes pointing to non-consistent targets; manual intervention is needed to reassign them to their original volumes."
	// StartPausedUnsupported refuses StartOptions.paused: converge's
	// domains do not start paused (spec.startStrategy is refused by the
	// support table, api/vmisupport).
	StartPausedUnsupported = "converge does not start VMs paused (spec.startStrategy is not supported)"
)

// Resource is the resource KubeVirt's lifecycle errors name,
// virtualmachine.kubevirt.io (v1.Resource("virtualmachine")).
var Resource = kubevirtv1.Resource("virtualmachine")

// conflict is KubeVirt's errors.NewConflict(v1.Resource("virtualmachine"),
// name, err): 409, "Operation cannot be fulfilled on
// virtualmachine.kubevirt.io "NAME": MESSAGE".
func conflict(name, format string, a ...any) *apierrors.StatusError {
	return apierrors.NewConflict(Resource, name, fmt.Errorf(format, a...))
}

// internal is KubeVirt's errors.NewInternalError(err): 500.
func internal(err error) *apierrors.StatusError { return apierrors.NewInternalError(err) }

// Start gives the change of KubeVirt's start subresource
// (pkg/virt-api/rest/lifecycle.go StartVMRequestHandler) for vm, whose VMI
// is vmi (nil: none): a Halted VM gets runStrategy Always (or the legacy
// spec.running true); a Manual or RerunOnFailure VM gets a Start request in
// status.stateChangeRequests, after a Stop of its VMI when that one ended.
// It refuses with KubeVirt's errors: 409 when the VMI runs, for Always and
// Once ("does not support manual start requests"), for RerunOnFailure
// after a failure, after a failed volume migration; 500 while other
// requests are pending; 400 for opts.Paused, which converge cannot honour.
func Start(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, opts *kubevirtv1.StartOptions) (Change, error) {
	if vmi != nil && !Final(vmi.Status.Phase) && vmi.Status.Phase != kubevirtv1.Unknown && vmi.Status.Phase != kubevirtv1.VmPhaseUnset {
		return Change{}, conflict(vm.Name, VMAlreadyRunning)
	}
	if vmCondition(vm, kubevirtv1.VirtualMachineManualRecoveryRequired) {
		return Change{}, conflict(vm.Name, ManualRecoveryRequired)
	}
	if opts != nil && opts.Paused {
		return Change{}, apierrors.NewBadRequest(StartPausedUnsupported)
	}
	rs := RunStrategy(vm)
	switch rs {
	case kubevirtv1.RunStrategyHalted:
		p, err := runningPatch(vm, true)
		return Change{Spec: p}, err
	case kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyManual:
		if rs == kubevirtv1.RunStrategyRerunOnFailure && vmi != nil && vmi.Status.Phase == kubevirtv1.Failed {
			return Change{}, conflict(vm.Name, "%v does not support starting VM from failed state", rs)
		}
		restart := vmi != nil && ((rs == kubevirtv1.RunStrategyRerunOnFailure && vmi.Status.Phase == kubevirtv1.Succeeded) ||
			(rs == kubevirtv1.RunStrategyManual && Final(vmi.Status.Phase)))
		changes := []kubevirtv1.VirtualMachineStateChangeRequest{startRequest()}
		if restart {
			changes = append([]kubevirtv1.VirtualMachineStateChangeRequest{stopRequest(vmi)}, changes...)
		}
		p, err := changeRequestPatch(vm, changes...)
		return Change{Status: p}, err
	}
	return Change{}, conflict(vm.Name, "%v does not support manual start requests", rs)
}

// Stop gives the change of KubeVirt's stop subresource (lifecycle.go
// StopVMRequestHandler): an Always or Once VM gets runStrategy Halted (or
// spec.running false); a Manual or RerunOnFailure VM gets a Stop request
// for its VMI; a Halted VM whose VMI still runs only with a grace period
// shorter than the VMI's (then as Manual). opts.GracePeriod, with a VMI
// that has not ended, first sets the VMI's
// spec.terminationGracePeriodSeconds, which the VM agent stops its domain
// with. It refuses with 409 "VM is not running" when there is nothing to
// stop.
func Stop(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, opts *kubevirtv1.StopOptions) (Change, error) {
	if opts == nil {
		opts = &kubevirtv1.StopOptions{}
	}
	running := vmi != nil && !Final(vmi.Status.Phase)
	var c Change
	if running && opts.GracePeriod != nil {
		p, err := gracePatch(vmi, *opts.GracePeriod)
		if err != nil {
			return Change{}, internal(err)
		}
		c.VMI = p
	}
	var err error
	switch rs := RunStrategy(vm); rs {
	case kubevirtv1.RunStrategyHalted:
		if !running {
			return Change{}, conflict(vm.Name, VMNotRunning)
		}
		old := vmi.Spec.TerminationGracePeriodSeconds
		if opts.GracePeriod == nil || (old != nil && *opts.GracePeriod >= *old) {
			return Change{}, conflict(vm.Name, "%v only supports manual stop requests with a shorter graceperiod", rs)
		}
		c.Status, err = changeRequestPatch(vm, stopRequest(vmi))
	case kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyManual:
		if !running {
			return Change{}, conflict(vm.Name, VMNotRunning)
		}
		c.Status, err = changeRequestPatch(vm, stopRequest(vmi))
	default:
		c.Spec, err = runningPatch(vm, false)
	}
	if err != nil {
		return Change{}, err
	}
	return c, nil
}

// RestartGrace is the termination grace period, in seconds, a forced
// restart (RestartOptions.gracePeriodSeconds 0) gives the VMI: KubeVirt
// deletes the virt-launcher pod with this grace period, "the shortest safe
// restart period"; converge has no pod and sets it on the VMI instead.
const RestartGrace = 1

// Restart gives the change of KubeVirt's restart subresource
// (lifecycle.go RestartVMRequestHandler): a Stop request for the current
// VMI then a Start. opts.gracePeriodSeconds may only be 0 (a forced
// restart: the VMI's grace period becomes RestartGrace first) and is
// refused with 400 otherwise, as KubeVirt; Halted and Once VMs (409, "does
// not support manual restart requests", spelt as KubeVirt spells it) and a
// VM without a VMI (409) are refused.
func Restart(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, opts *kubevirtv1.RestartOptions) (Change, error) {
	if opts != nil && opts.GracePeriodSeconds != nil {
		switch g := *opts.GracePeriodSeconds; {
		case g > 0:
			return Change{}, apierrors.NewBadRequest("For force restart, only gracePeriod=0 is supported for now")
		case g < 0:
			return Change{}, apierrors.NewBadRequest("gracePeriod has to be greater or equal to 0")
		}
	}
	if vmCondition(vm, kubevirtv1.VirtualMachineConditionType(kubevirtv1.VirtualMachineInstanceVolumesChange)) {
		return Change{}, conflict(vm.Name, ManualRecoveryRequired)
	}
	rs := RunStrategy(vm)
	if rs == kubevirtv1.RunStrategyHalted || rs == kubevirtv1.RunStrategyOnce {
		return Change{}, conflict(vm.Name, "RunStategy %v does not support manual restart requests", rs)
	}
	if vmi == nil {
		return Change{}, conflict(vm.Name, "%s: %v", VMNotRunning, kubevirtv1.RunStrategyHalted)
	}
	var c Change
	if opts != nil && opts.GracePeriodSeconds != nil && !Final(vmi.Status.Phase) {
		p, err := gracePatch(vmi, RestartGrace)
		if err != nil {
			return Change{}, internal(err)
		}
		c.VMI = p
	}
	p, err := changeRequestPatch(vm, stopRequest(vmi), startRequest())
	if err != nil {
		return Change{}, err
	}
	c.Status = p
	return c, nil
}

// vmCondition reports whether vm has condition t with status True.
func vmCondition(vm *kubevirtv1.VirtualMachine, t kubevirtv1.VirtualMachineConditionType) bool {
	for _, c := range vm.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
