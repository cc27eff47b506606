package vm_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// request appends to the VM's status.stateChangeRequests as KubeVirt's
// start/stop/restart subresources do.
func (e *env) request(t *testing.T, name string, reqs ...kubevirtv1.VirtualMachineStateChangeRequest) {
	t.Helper()
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vm := e.VM(t, name)
		vm.Status.StateChangeRequests = append(vm.Status.StateChangeRequests, reqs...)
		return e.C.Status().Update(context.Background(), vm) == nil
	})
}

// TestStateChangeAndDelete drives a Manual VM with start and stop
// requests, restarts an Always VM (Stop{uid} then Start), and deletes a
// running VM: its VMI goes first, then the VM (finalizer).
func TestStateChangeAndDelete(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	noRequests := func(vm *kubevirtv1.VirtualMachine) bool { return len(vm.Status.StateChangeRequests) == 0 }

	e.CreateVM(t, "manual", kubevirtv1.RunStrategyManual)
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return e.VM(t, "manual").Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStopped
	})
	if e.VMI(t, "manual") != nil {
		t.Fatal("a Manual VM got a VMI without a start request")
	}
	e.request(t, "manual", kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest})
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.VMI(t, "manual") != nil && noRequests(e.VM(t, "manual")) })
	uid := e.SetPhase(t, "manual", kubevirtv1.Running)
	e.request(t, "manual", kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &uid})
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.VMI(t, "manual") == nil && noRequests(e.VM(t, "manual")) })
	time.Sleep(time.Second) // a Manual VM must stay stopped: nothing recreates it
	if e.VMI(t, "manual") != nil {
		t.Fatal("a stopped Manual VM got a new VMI")
	}

	e.CreateVM(t, "restart", kubevirtv1.RunStrategyAlways)
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.VMI(t, "restart") != nil })
	uid = e.SetPhase(t, "restart", kubevirtv1.Running)
	e.request(t, "restart", kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &uid},
		kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest})
	controlplane.Eventually(t, 30*time.Second, func() bool {
		v := e.VMI(t, "restart")
		return v != nil && v.UID != uid && noRequests(e.VM(t, "restart"))
	})

	if err := e.C.Delete(ctx, e.VM(t, "restart")); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		err := e.C.Get(ctx, types.NamespacedName{Namespace: e.NS, Name: "restart"}, &kubevirtv1.VirtualMachine{})
		return client.IgnoreNotFound(err) == nil && err != nil && e.VMI(t, "restart") == nil
	})
}
