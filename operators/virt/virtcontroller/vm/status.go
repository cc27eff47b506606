package vm

import (
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// PrintableStatus gives a VM's status.printableStatus from the VM and its
// VMI (nil: none), after KubeVirt vm.go (setPrintableStatus), in its order
// of precedence: Terminating (VM being deleted), Stopping (VMI being
// deleted, or still there while the VM is Halted), ErrorUnschedulable (VMI
// Pending with PodScheduled=False/Unschedulable), Paused, Running,
// Starting (VMI not yet running), Stopped (no VMI, or it ended). The
// statuses of the VM's volumes (ErrorPvcNotFound, DataVolumeError,
// Provisioning, WaitingForVolumeBinding) are PrintableStatusWithVolumes'.
// Not reported yet: CrashLoopBackOff, Migrating.
func PrintableStatus(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) kubevirtv1.VirtualMachinePrintableStatus {
	switch {
	case vm.DeletionTimestamp != nil:
		return kubevirtv1.VirtualMachineStatusTerminating
	case vmi == nil:
		return kubevirtv1.VirtualMachineStatusStopped
	case vmi.DeletionTimestamp != nil && !vmstate.Final(vmi.Status.Phase):
		return kubevirtv1.VirtualMachineStatusStopping
	case vmstate.RunStrategy(vm) == kubevirtv1.RunStrategyHalted && !vmstate.Final(vmi.Status.Phase):
		return kubevirtv1.VirtualMachineStatusStopping
	case vmstate.Final(vmi.Status.Phase):
		return kubevirtv1.VirtualMachineStatusStopped
	case unschedulable(vmi):
		return kubevirtv1.VirtualMachineStatusUnschedulable
	case vmiCondition(vmi, kubevirtv1.VirtualMachineInstancePaused) == corev1.ConditionTrue:
		return kubevirtv1.VirtualMachineStatusPaused
	case vmi.Status.Phase == kubevirtv1.Running:
		return kubevirtv1.VirtualMachineStatusRunning
	default:
		return kubevirtv1.VirtualMachineStatusStarting
	}
}

// unschedulable reports whether the scheduler left vmi Pending.
func unschedulable(vmi *kubevirtv1.VirtualMachineInstance) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled) &&
			c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// vmiCondition gives the status of vmi's condition t ("" when absent).
func vmiCondition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) corev1.ConditionStatus {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}
