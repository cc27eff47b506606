// Package vmstate reads what KubeVirt's VirtualMachine and
// VirtualMachineInstance objects (kubevirt.io/api/core/v1) say about
// running, for the virt-controller role's controllers
// (operators/virt/virtcontroller/vm, scheduler, nodehealth) and the
// virt-api role (operators/virt/virtapi): a VM's effective run strategy
// (RunStrategy, after KubeVirt's VirtualMachine.RunStrategy), whether a
// VMI phase is final (Final, after KubeVirt's
// VirtualMachineInstance.IsFinal), and the changes KubeVirt's lifecycle
// subresources make (Start, Stop, Restart: the JSON patches of
// kubevirt pkg/virt-api/rest/lifecycle.go, with its errors). Pure
// functions, no client.
package vmstate

import (
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// RunStrategy gives vm's effective run strategy: spec.runStrategy, else
// the legacy spec.running (true: Always, false: Halted), else Halted.
func RunStrategy(vm *kubevirtv1.VirtualMachine) kubevirtv1.VirtualMachineRunStrategy {
	if vm.Spec.RunStrategy != nil {
		return *vm.Spec.RunStrategy
	}
	if vm.Spec.Running != nil && *vm.Spec.Running { //nolint:staticcheck // the legacy field is still served
		return kubevirtv1.RunStrategyAlways
	}
	return kubevirtv1.RunStrategyHalted
}

// Final reports whether a VMI phase is terminal (Succeeded or Failed).
func Final(p kubevirtv1.VirtualMachineInstancePhase) bool {
	return p == kubevirtv1.Succeeded || p == kubevirtv1.Failed
}
