package vm

import (
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// Action is what the VM controller does to a VM's VMI.
type Action int

const (
	// Keep leaves the VMI (or its absence) as it is.
	Keep Action = iota
	// Create creates the VMI from spec.template.
	Create
	// Delete deletes the VMI (to stop it, or to recreate it next).
	Delete
	// Halt sets a Once VM's spec.runStrategy to Halted once its VMI ended,
	// as KubeVirt does.
	Halt
)

// Decide gives what to do with vmi (nil: none exists) for run strategy s,
// after KubeVirt pkg/virt-controller/watch/vm/vm.go (syncRunStrategy):
//
//	Always          none → Create; Succeeded or Failed → Delete (then Create)
//	RerunOnFailure  none → Create; Failed → Delete (then Create); Succeeded → Keep
//	Once            none and never created → Create; Succeeded or Failed → Halt
//	Manual          Keep (started and stopped by the start/stop subresources)
//	Halted          a VMI → Delete
//
// created says whether the VM already ran a VMI (status.created or a
// recorded start), which keeps Once from running twice. A VMI being
// deleted is always kept (waited for).
func Decide(s kubevirtv1.VirtualMachineRunStrategy, vmi *kubevirtv1.VirtualMachineInstance, created bool) Action {
	if vmi != nil && vmi.DeletionTimestamp != nil {
		return Keep
	}
	switch s {
	case kubevirtv1.RunStrategyAlways:
		if vmi == nil {
			return Create
		}
		if vmstate.Final(vmi.Status.Phase) {
			return Delete
		}
	case kubevirtv1.RunStrategyRerunOnFailure:
		if vmi == nil {
			return Create
		}
		if vmi.Status.Phase == kubevirtv1.Failed {
			return Delete
		}
	case kubevirtv1.RunStrategyOnce:
		if vmi == nil && !created {
			return Create
		}
		if vmi != nil && vmstate.Final(vmi.Status.Phase) {
			return Halt
		}
	case kubevirtv1.RunStrategyHalted:
		if vmi != nil {
			return Delete
		}
	}
	return Keep
}

// StateChange processes the first of a VM's status.stateChangeRequests
// (the queue KubeVirt's start, stop and restart subresources append to;
// a restart is Stop{uid} then Start), after KubeVirt vm.go: it gives the
// action on vmi (nil: none) and the requests left.
//
//	Stop   no VMI, or uid set and not vmi's → done; VMI being deleted → wait; else Delete
//	Start  no VMI → Create, done; VMI ended → Delete (then Create); VMI live → done
//
// A request that is done is removed; at most one action is taken per call.
func StateChange(reqs []kubevirtv1.VirtualMachineStateChangeRequest, vmi *kubevirtv1.VirtualMachineInstance) (Action, []kubevirtv1.VirtualMachineStateChangeRequest) {
	if len(reqs) == 0 {
		return Keep, reqs
	}
	r, rest := reqs[0], reqs[1:]
	switch r.Action {
	case kubevirtv1.StopRequest:
		switch {
		case vmi == nil || (r.UID != nil && *r.UID != vmi.UID):
			return Keep, rest
		case vmi.DeletionTimestamp != nil:
			return Keep, reqs
		default:
			return Delete, reqs
		}
	case kubevirtv1.StartRequest:
		switch {
		case vmi == nil:
			return Create, rest
		case vmi.DeletionTimestamp != nil:
			return Keep, reqs
		case vmstate.Final(vmi.Status.Phase):
			return Delete, reqs
		default:
			return Keep, rest
		}
	}
	return Keep, rest // an unknown action is dropped
}
