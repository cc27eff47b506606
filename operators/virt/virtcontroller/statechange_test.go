package virtcontroller_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

func (e *env) createVM(t *testing.T, name string, s kubevirtv1.VirtualMachineRunStrategy) {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &s, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
				Memory: &kubevirtv1.Memory{Guest: resource.NewQuantity(64<<20, resource.BinarySI)}}}}},
	}
	if err := e.c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
}

// request appends to the VM's status.stateChangeRequests as KubeVirt's
// start/stop/restart subresources do.
func (e *env) request(t *testing.T, name string, reqs ...kubevirtv1.VirtualMachineStateChangeRequest) {
	t.Helper()
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vm := e.vm(t, name)
		vm.Status.StateChangeRequests = append(vm.Status.StateChangeRequests, reqs...)
		return e.c.Status().Update(context.Background(), vm) == nil
	})
}

// TestStateChangeAndDelete drives a Manual VM with start and stop
// requests, restarts an Always VM (Stop{uid} then Start), and deletes a
// running VM: its VMI goes first, then the VM (finalizer).
func TestStateChangeAndDelete(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	noRequests := func(vm *kubevirtv1.VirtualMachine) bool { return len(vm.Status.StateChangeRequests) == 0 }

	e.createVM(t, "manual", kubevirtv1.RunStrategyManual)
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return e.vm(t, "manual").Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStopped
	})
	if e.vmi(t, "manual") != nil {
		t.Fatal("a Manual VM got a VMI without a start request")
	}
	e.request(t, "manual", kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest})
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.vmi(t, "manual") != nil && noRequests(e.vm(t, "manual")) })
	uid := e.setPhase(t, "manual", kubevirtv1.Running)
	e.request(t, "manual", kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &uid})
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.vmi(t, "manual") == nil && noRequests(e.vm(t, "manual")) })
	time.Sleep(time.Second) // a Manual VM must stay stopped: nothing recreates it
	if e.vmi(t, "manual") != nil {
		t.Fatal("a stopped Manual VM got a new VMI")
	}

	e.createVM(t, "restart", kubevirtv1.RunStrategyAlways)
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.vmi(t, "restart") != nil })
	uid = e.setPhase(t, "restart", kubevirtv1.Running)
	e.request(t, "restart", kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &uid},
		kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest})
	controlplane.Eventually(t, 30*time.Second, func() bool {
		v := e.vmi(t, "restart")
		return v != nil && v.UID != uid && noRequests(e.vm(t, "restart"))
	})

	if err := e.c.Delete(ctx, e.vm(t, "restart")); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "restart"}, &kubevirtv1.VirtualMachine{})
		return client.IgnoreNotFound(err) == nil && err != nil && e.vmi(t, "restart") == nil
	})
}
