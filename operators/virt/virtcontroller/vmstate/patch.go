package vmstate

import (
	"encoding/json"
	"errors"

	"k8s.io/apimachinery/pkg/api/equality"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// patchOp is one JSON patch (RFC 6902) operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// testOp is a test operation, whose value may be null (a field unset).
type testOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

func startRequest() kubevirtv1.VirtualMachineStateChangeRequest {
	return kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest}
}

func stopRequest(vmi *kubevirtv1.VirtualMachineInstance) kubevirtv1.VirtualMachineStateChangeRequest {
	uid := vmi.UID
	return kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &uid}
}

// runningPatch sets spec.runStrategy to Always (running) or Halted, or the
// legacy spec.running when the VM uses it, testing the old value (KubeVirt
// lifecycle.go getRunningPatch). A VM with neither gets spec.runStrategy
// added (KubeVirt's defaulting webhook always sets one; converge's VMs may
// have neither, which means Halted).
func runningPatch(vm *kubevirtv1.VirtualMachine, running bool) ([]byte, error) {
	rs := kubevirtv1.RunStrategyHalted
	if running {
		rs = kubevirtv1.RunStrategyAlways
	}
	switch {
	case vm.Spec.RunStrategy != nil:
		return json.Marshal([]any{testOp{"test", "/spec/runStrategy", *vm.Spec.RunStrategy}, patchOp{"replace", "/spec/runStrategy", rs}})
	case vm.Spec.Running != nil: //nolint:staticcheck // the legacy field is still served
		return json.Marshal([]any{testOp{"test", "/spec/running", *vm.Spec.Running}, testOp{"replace", "/spec/running", running}}) //nolint:staticcheck
	}
	return json.Marshal([]any{patchOp{"add", "/spec/runStrategy", rs}})
}

// changeRequestPatch appends changes to status.stateChangeRequests, testing
// the current list (KubeVirt lifecycle.go getChangeRequestJson): an empty
// status gets one; a pending list takes only a lone Stop, which replaces
// it; a startFailure is cleared. Other pending requests are refused with
// KubeVirt's 500 ChangeUnderway.
func changeRequestPatch(vm *kubevirtv1.VirtualMachine, changes ...kubevirtv1.VirtualMachineStateChangeRequest) ([]byte, error) {
	if equality.Semantic.DeepEqual(vm.Status, kubevirtv1.VirtualMachineStatus{}) {
		return json.Marshal([]any{patchOp{"add", "/status", kubevirtv1.VirtualMachineStatus{StateChangeRequests: changes}}})
	}
	ops := []any{testOp{"test", "/status/stateChangeRequests", vm.Status.StateChangeRequests}}
	switch {
	case len(vm.Status.StateChangeRequests) == 0:
		ops = append(ops, patchOp{"add", "/status/stateChangeRequests", changes})
	case len(changes) == 1 && changes[0].Action == kubevirtv1.StopRequest:
		ops = append(ops, patchOp{"replace", "/status/stateChangeRequests", changes})
	default:
		return nil, internal(errUnderway)
	}
	if vm.Status.StartFailure != nil {
		ops = append(ops, patchOp{Op: "remove", Path: "/status/startFailure"})
	}
	return json.Marshal(ops)
}

// gracePatch sets the VMI's spec.terminationGracePeriodSeconds to seconds,
// testing the old value (KubeVirt's stop subresource; it replaces, converge
// adds, which also sets a field the VMI does not have yet).
func gracePatch(vmi *kubevirtv1.VirtualMachineInstance, seconds int64) ([]byte, error) {
	var old any
	if g := vmi.Spec.TerminationGracePeriodSeconds; g != nil {
		old = *g
	}
	return json.Marshal([]any{testOp{"test", "/spec/terminationGracePeriodSeconds", old}, testOp{"add", "/spec/terminationGracePeriodSeconds", seconds}})
}

// errUnderway is ChangeUnderway as an error.
var errUnderway = errors.New(ChangeUnderway)
