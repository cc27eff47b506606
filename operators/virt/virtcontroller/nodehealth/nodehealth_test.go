package nodehealth_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/nodehealth"
)

// TestNodeUnresponsive: a VirtualMachine (runStrategy Always) runs on node
// "dead", whose agent holds the VMI's finalizer; the agent's heartbeat
// then stops (10 min old, timeout 5 min). The node is labelled
// kubevirt.io/schedulable=false, the VMI is Failed with reason
// NodeUnresponsive and an event, its finalizer is released once the VM
// controller deletes it, and the VM's new VMI runs on node "alive". When
// the Node "alive" is deleted, its VMI is failed too, and the VM's next
// VMI stays Pending: the only node left is unschedulable.
func TestNodeUnresponsive(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	fresh := map[string]string{kubevirtv1.VirtHandlerHeartbeat: time.Now().UTC().Format(time.RFC3339)}
	dead := virttest.Node("dead", "2", "4Gi", map[string]string{kubevirtv1.NodeSchedulable: "true"})
	dead.Annotations = fresh
	e.AddNode(t, dead)
	e.CreateVM(t, "web", kubevirtv1.RunStrategyAlways)
	var first *kubevirtv1.VirtualMachineInstance
	controlplane.Eventually(t, 30*time.Second, func() bool {
		first = e.VMI(t, "web")
		return first != nil && first.Status.NodeName == "dead"
	})
	// The agent on "dead" holds the VMI and runs it.
	controllerutil.AddFinalizer(first, kubevirtv1.VirtualMachineInstanceFinalizer)
	if err := e.C.Update(ctx, first); err != nil {
		t.Fatal(err)
	}
	e.SetPhase(t, "web", kubevirtv1.Running)

	alive := virttest.Node("alive", "2", "4Gi", map[string]string{kubevirtv1.NodeSchedulable: "true"})
	alive.Annotations = fresh
	e.AddNode(t, alive)
	n := &corev1.Node{}
	if err := e.C.Get(ctx, client.ObjectKey{Name: "dead"}, n); err != nil {
		t.Fatal(err)
	}
	n.Annotations[kubevirtv1.VirtHandlerHeartbeat] = time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	if err := e.C.Update(ctx, n); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	controlplane.Eventually(t, time.Minute, func() bool {
		v := e.VMI(t, "web")
		return v != nil && v.UID != first.UID && v.Status.NodeName == "alive"
	})
	t.Logf("new VMI on node alive %s after the heartbeat went stale", time.Since(start).Round(time.Millisecond))
	// The event follows the status patch that failed the VMI.
	if !unresponsiveEvent(t, e, first.UID) {
		t.Errorf("no %s event on the first VMI", nodehealth.NodeUnresponsiveReason)
	}
	if err := e.C.Get(ctx, client.ObjectKey{Name: "dead"}, n); err != nil {
		t.Fatal(err)
	}
	if n.Labels[kubevirtv1.NodeSchedulable] != "false" {
		t.Errorf("node dead labels %v, want %s=false", n.Labels, kubevirtv1.NodeSchedulable)
	}
	if err := e.C.Get(ctx, client.ObjectKey{Name: "alive"}, n); err != nil {
		t.Fatal(err)
	}
	if n.Labels[kubevirtv1.NodeSchedulable] != "true" {
		t.Errorf("node alive labels %v, want %s=true", n.Labels, kubevirtv1.NodeSchedulable)
	}

	second := e.VMI(t, "web")
	if err := e.C.Delete(ctx, n); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, time.Minute, func() bool {
		v := e.VMI(t, "web")
		return v != nil && v.UID != second.UID && v.Status.NodeName == ""
	})
	if !unresponsiveEvent(t, e, second.UID) {
		t.Errorf("no %s event on the VMI of the deleted node", nodehealth.NodeUnresponsiveReason)
	}
}

// unresponsiveEvent reports whether the VMI uid got a NodeUnresponsive
// event.
func unresponsiveEvent(t *testing.T, e *env, uid types.UID) bool {
	t.Helper()
	events := &corev1.EventList{}
	if err := e.C.List(context.Background(), events, client.InNamespace(e.NS)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if ev.Reason == nodehealth.NodeUnresponsiveReason && ev.InvolvedObject.UID == uid {
			return true
		}
	}
	return false
}
