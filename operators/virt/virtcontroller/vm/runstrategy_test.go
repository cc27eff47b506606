package vm_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	vmcontroller "github.com/converge-dev/converge/operators/virt/virtcontroller/vm"
)

func vmiIn(p kubevirtv1.VirtualMachineInstancePhase) *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: p}}
}

func deleting(v *kubevirtv1.VirtualMachineInstance) *kubevirtv1.VirtualMachineInstance {
	now := metav1.Now()
	v.DeletionTimestamp = &now
	return v
}

// TestDecide is the run strategy table of KubeVirt vm.go, pure.
func TestDecide(t *testing.T) {
	const (
		always = kubevirtv1.RunStrategyAlways
		rerun  = kubevirtv1.RunStrategyRerunOnFailure
		once   = kubevirtv1.RunStrategyOnce
		manual = kubevirtv1.RunStrategyManual
		halted = kubevirtv1.RunStrategyHalted
	)
	tests := []struct {
		s       kubevirtv1.VirtualMachineRunStrategy
		vmi     *kubevirtv1.VirtualMachineInstance
		created bool
		want    vmcontroller.Action
	}{
		{always, nil, false, vmcontroller.Create},
		{always, vmiIn(kubevirtv1.Running), true, vmcontroller.Keep},
		{always, vmiIn(kubevirtv1.Failed), true, vmcontroller.Delete},
		{always, vmiIn(kubevirtv1.Succeeded), true, vmcontroller.Delete},
		{always, deleting(vmiIn(kubevirtv1.Failed)), true, vmcontroller.Keep},
		{rerun, nil, false, vmcontroller.Create},
		{rerun, vmiIn(kubevirtv1.Failed), true, vmcontroller.Delete},
		{rerun, vmiIn(kubevirtv1.Succeeded), true, vmcontroller.Keep},
		{once, nil, false, vmcontroller.Create},
		{once, nil, true, vmcontroller.Keep},
		{once, vmiIn(kubevirtv1.Running), true, vmcontroller.Keep},
		{once, vmiIn(kubevirtv1.Succeeded), true, vmcontroller.Halt},
		{once, vmiIn(kubevirtv1.Failed), true, vmcontroller.Halt},
		{manual, nil, false, vmcontroller.Keep},
		{manual, vmiIn(kubevirtv1.Failed), true, vmcontroller.Keep},
		{halted, nil, false, vmcontroller.Keep},
		{halted, vmiIn(kubevirtv1.Running), true, vmcontroller.Delete},
	}
	for _, tt := range tests {
		phase := "none"
		if tt.vmi != nil {
			phase = string(tt.vmi.Status.Phase)
		}
		if got := vmcontroller.Decide(tt.s, tt.vmi, tt.created); got != tt.want {
			t.Errorf("Decide(%s, vmi %s, created %v) = %d, want %d", tt.s, phase, tt.created, got, tt.want)
		}
	}
}

func TestStateChange(t *testing.T) {
	other := types.UID("other")
	start := kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest}
	stop := kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest}
	stopOther := kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &other}
	tests := []struct {
		name     string
		reqs     []kubevirtv1.VirtualMachineStateChangeRequest
		vmi      *kubevirtv1.VirtualMachineInstance
		want     vmcontroller.Action
		wantLeft int
	}{
		{"none", nil, nil, vmcontroller.Keep, 0},
		{"start without VMI", []kubevirtv1.VirtualMachineStateChangeRequest{start}, nil, vmcontroller.Create, 0},
		{"start running", []kubevirtv1.VirtualMachineStateChangeRequest{start}, vmiIn(kubevirtv1.Running), vmcontroller.Keep, 0},
		{"start ended", []kubevirtv1.VirtualMachineStateChangeRequest{start}, vmiIn(kubevirtv1.Succeeded), vmcontroller.Delete, 1},
		{"stop running", []kubevirtv1.VirtualMachineStateChangeRequest{stop, start}, vmiIn(kubevirtv1.Running), vmcontroller.Delete, 2},
		{"stop waits for deletion", []kubevirtv1.VirtualMachineStateChangeRequest{stop, start}, deleting(vmiIn(kubevirtv1.Running)), vmcontroller.Keep, 2},
		{"stop done", []kubevirtv1.VirtualMachineStateChangeRequest{stop, start}, nil, vmcontroller.Keep, 1},
		{"stop of another VMI", []kubevirtv1.VirtualMachineStateChangeRequest{stopOther}, vmiIn(kubevirtv1.Running), vmcontroller.Keep, 0},
	}
	for _, tt := range tests {
		got, left := vmcontroller.StateChange(tt.reqs, tt.vmi)
		if got != tt.want || len(left) != tt.wantLeft {
			t.Errorf("%s: StateChange = %d with %d left, want %d with %d left", tt.name, got, len(left), tt.want, tt.wantLeft)
		}
	}
}

func TestPrintableStatus(t *testing.T) {
	halted := kubevirtv1.RunStrategyHalted
	always := kubevirtv1.RunStrategyAlways
	vm := func(s *kubevirtv1.VirtualMachineRunStrategy, deleted bool) *kubevirtv1.VirtualMachine {
		v := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: s}}
		if deleted {
			now := metav1.Now()
			v.DeletionTimestamp = &now
		}
		return v
	}
	unsched := vmiIn(kubevirtv1.Pending)
	unsched.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: "PodScheduled", Status: corev1.ConditionFalse, Reason: "Unschedulable"}}
	paused := vmiIn(kubevirtv1.Running)
	paused.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue}}
	tests := []struct {
		vm   *kubevirtv1.VirtualMachine
		vmi  *kubevirtv1.VirtualMachineInstance
		want kubevirtv1.VirtualMachinePrintableStatus
	}{
		{vm(&always, true), vmiIn(kubevirtv1.Running), kubevirtv1.VirtualMachineStatusTerminating},
		{vm(&always, false), nil, kubevirtv1.VirtualMachineStatusStopped},
		{vm(&always, false), deleting(vmiIn(kubevirtv1.Running)), kubevirtv1.VirtualMachineStatusStopping},
		{vm(&halted, false), vmiIn(kubevirtv1.Running), kubevirtv1.VirtualMachineStatusStopping},
		{vm(&always, false), vmiIn(kubevirtv1.Failed), kubevirtv1.VirtualMachineStatusStopped},
		{vm(&always, false), unsched, kubevirtv1.VirtualMachineStatusUnschedulable},
		{vm(&always, false), paused, kubevirtv1.VirtualMachineStatusPaused},
		{vm(&always, false), vmiIn(kubevirtv1.Running), kubevirtv1.VirtualMachineStatusRunning},
		{vm(&always, false), vmiIn(kubevirtv1.Scheduled), kubevirtv1.VirtualMachineStatusStarting},
		{vm(&always, false), vmiIn(""), kubevirtv1.VirtualMachineStatusStarting},
	}
	for i, tt := range tests {
		if got := vmcontroller.PrintableStatus(tt.vm, tt.vmi); got != tt.want {
			t.Errorf("case %d: PrintableStatus = %s, want %s", i, got, tt.want)
		}
	}
}
