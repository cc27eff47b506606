package reconciler

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// WorkloadRule reports whether rule is one of the workload health rules
// WorkloadHealth judges (graph.HealthVirtualMachine,
// HealthVirtualMachineInstance, HealthDataVolume, HealthExists).
func WorkloadRule(rule string) bool {
	switch rule {
	case graph.HealthVirtualMachine, graph.HealthVirtualMachineInstance, graph.HealthDataVolume, graph.HealthExists:
		return true
	}
	return false
}

// WorkloadHealth judges the live object u (nil: not found) with the
// workload health rule rule, and says why it is not Healthy (the message
// does not name the object). An object not found is Progressing; an
// object being deleted is Progressing ("Terminating"). An unknown rule is
// Healthy once the object exists, as HealthExists.
func WorkloadHealth(rule string, u *unstructured.Unstructured) (Health, string) {
	switch {
	case u == nil:
		return Progressing, "not found yet"
	case u.GetDeletionTimestamp() != nil:
		return Progressing, "Terminating"
	}
	switch rule {
	case graph.HealthVirtualMachine:
		return VirtualMachineHealth(u)
	case graph.HealthVirtualMachineInstance:
		return VirtualMachineInstanceHealth(u)
	case graph.HealthDataVolume:
		return DataVolumeHealth(u)
	}
	return Healthy, ""
}

// failedVMStatuses are the printable statuses of a VM that cannot run as
// asked until someone acts: KubeVirt's error statuses (kubevirt.io/api
// core/v1 VirtualMachinePrintableStatus).
var failedVMStatuses = map[kubevirtv1.VirtualMachinePrintableStatus]bool{
	kubevirtv1.VirtualMachineStatusCrashLoopBackOff: true,
	kubevirtv1.VirtualMachineStatusUnschedulable:    true,
	kubevirtv1.VirtualMachineStatusErrImagePull:     true,
	kubevirtv1.VirtualMachineStatusImagePullBackOff: true,
	kubevirtv1.VirtualMachineStatusPvcNotFound:      true,
	kubevirtv1.VirtualMachineStatusDataVolumeError:  true,
	"ErrorDataVolumeNotFound":                       true,
}

// VirtualMachineHealth judges a kubevirt.io/v1 VirtualMachine: healthy
// when it runs as its run strategy (vmstate.RunStrategy: spec.runStrategy,
// else spec.running, else Halted) asks, whether that is running or
// stopped — a VM that Git declares Halted is healthy once stopped, not
// "Suspended" or "Progressing" forever (the Argo CD health check's bug,
// argo-cd #29664):
//
//   - Failed: condition Failure=True (the VM controller cannot create its
//     VMI), or an error printable status (ErrorUnschedulable,
//     CrashLoopBackOff, ErrImagePull, ImagePullBackOff, ErrorPvcNotFound,
//     ErrorDataVolumeNotFound, DataVolumeError);
//   - Progressing while the VM controller has not observed the VM's
//     generation (status.observedGeneration < metadata.generation);
//   - Healthy when condition Ready=True (running and ready) or Paused=True
//     (paused by a user, virtctl pause);
//   - Halted: Healthy once stopped (no VMI: status.created false, or it
//     ended: Stopped), Progressing ("Stopping") while one runs;
//   - Manual: Healthy when stopped (no VMI, or it ended: Stopped), else
//     Progressing until Ready;
//   - Once: Healthy once its one run ended (Stopped), else Progressing
//     until Ready;
//   - Always, RerunOnFailure and the rest: Progressing until Ready, with
//     the printable status (Starting, Provisioning, ...).
func VirtualMachineHealth(u *unstructured.Unstructured) (Health, string) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, vm); err != nil {
		return Failed, fmt.Sprintf("status does not decode: %v", err)
	}
	st := vm.Status
	strategy := vmstate.RunStrategy(vm)
	for _, c := range st.Conditions {
		if c.Type == kubevirtv1.VirtualMachineFailure && c.Status == corev1.ConditionTrue {
			return Failed, joinNonEmpty(": ", "Failure", c.Reason, c.Message)
		}
	}
	if failedVMStatuses[st.PrintableStatus] {
		return Failed, joinNonEmpty(": ", string(st.PrintableStatus), vmConditionMessage(vm))
	}
	if st.ObservedGeneration != 0 && st.ObservedGeneration < vm.Generation {
		return Progressing, fmt.Sprintf("generation %d not observed yet by the VM controller (observed %d)", vm.Generation, st.ObservedGeneration)
	}
	if vmCondition(vm, kubevirtv1.VirtualMachineReady) == corev1.ConditionTrue || vmCondition(vm, kubevirtv1.VirtualMachinePaused) == corev1.ConditionTrue {
		return Healthy, ""
	}
	stopped := !st.Created || st.PrintableStatus == kubevirtv1.VirtualMachineStatusStopped
	switch strategy {
	case kubevirtv1.RunStrategyHalted:
		if stopped {
			return Healthy, ""
		}
		return Progressing, "Stopping (runStrategy Halted)"
	case kubevirtv1.RunStrategyManual:
		if stopped {
			return Healthy, ""
		}
	case kubevirtv1.RunStrategyOnce:
		if st.PrintableStatus == kubevirtv1.VirtualMachineStatusStopped {
			return Healthy, ""
		}
	}
	return Progressing, joinNonEmpty(": ", orElse(string(st.PrintableStatus), "no status yet"), vmConditionMessage(vm)) +
		fmt.Sprintf(" (runStrategy %s: waiting for Ready)", strategy)
}

// vmCondition gives the status of vm's condition t ("" when absent).
func vmCondition(vm *kubevirtv1.VirtualMachine, t kubevirtv1.VirtualMachineConditionType) corev1.ConditionStatus {
	for _, c := range vm.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// vmConditionMessage gives the message of vm's Ready condition when it is
// not True, else of its first False condition with one.
func vmConditionMessage(vm *kubevirtv1.VirtualMachine) string {
	for _, c := range vm.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineReady && c.Status != corev1.ConditionTrue && c.Message != "" {
			return c.Message
		}
	}
	for _, c := range vm.Status.Conditions {
		if c.Status == corev1.ConditionFalse && c.Message != "" {
			return c.Message
		}
	}
	return ""
}

// VirtualMachineInstanceHealth judges a kubevirt.io/v1
// VirtualMachineInstance: Failed on phase Failed; Healthy on phase
// Succeeded (it ran to its end, as a Pod that succeeded) or condition
// Ready=True; Progressing otherwise, with its phase.
func VirtualMachineInstanceHealth(u *unstructured.Unstructured) (Health, string) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, vmi); err != nil {
		return Failed, fmt.Sprintf("status does not decode: %v", err)
	}
	var notReady string
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady {
			if c.Status == corev1.ConditionTrue {
				return Healthy, ""
			}
			notReady = joinNonEmpty(": ", c.Reason, c.Message)
		}
	}
	switch vmi.Status.Phase {
	case kubevirtv1.Failed:
		return Failed, joinNonEmpty(": ", "Failed", vmi.Status.Reason, notReady)
	case kubevirtv1.Succeeded:
		return Healthy, ""
	}
	return Progressing, joinNonEmpty(": ", orElse(string(vmi.Status.Phase), "no status yet"), notReady)
}

// DataVolumeHealth judges a cdi.kubevirt.io/v1beta1 DataVolume: Healthy on
// phase Succeeded, Failed on phase Failed (with the Running condition's
// message), Progressing otherwise with its phase, its progress
// (status.progress, e.g. "ImportInProgress 45.50%") and, when the Running
// condition is False with a reason (an import error CDI retries, no node
// to import on), that reason and message.
func DataVolumeHealth(u *unstructured.Unstructured) (Health, string) {
	dv := &cdiv1.DataVolume{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, dv); err != nil {
		return Failed, fmt.Sprintf("status does not decode: %v", err)
	}
	var running string
	for _, c := range dv.Status.Conditions {
		if c.Type == cdiv1.DataVolumeRunning && c.Status == corev1.ConditionFalse && c.Reason != "" {
			running = joinNonEmpty(": ", c.Reason, c.Message)
		}
	}
	switch dv.Status.Phase {
	case cdiv1.Succeeded:
		return Healthy, ""
	case cdiv1.Failed:
		return Failed, joinNonEmpty(": ", "Failed", running)
	}
	msg := orElse(string(dv.Status.Phase), "no status yet")
	if p := string(dv.Status.Progress); p != "" && p != "N/A" {
		msg += " " + p
	}
	return Progressing, joinNonEmpty(": ", msg, running)
}

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
