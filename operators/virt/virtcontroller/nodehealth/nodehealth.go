package nodehealth

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// NodeUnresponsiveReason is the VMI status reason and event reason of a
// VMI failed because its node's agent stopped its heartbeat (KubeVirt's
// NodeUnresponsiveReason).
const NodeUnresponsiveReason = "NodeUnresponsive"

// Reconciler is virt-controller's node controller (KubeVirt
// pkg/virt-controller/watch/node) for nodes that run converge's VM
// agent. Requests name a Node. When the Node's kubevirt.io/heartbeat
// annotation is older than HeartbeatTimeout, or the Node is gone, it
//   - labels the Node kubevirt.io/schedulable=false (the scheduler then
//     skips it; the agent sets it true again with its next heartbeat);
//   - moves every VMI on the node that is not final to Failed with reason
//     NodeUnresponsive and an event, so a VirtualMachine with runStrategy
//     Always gets a new VMI elsewhere;
//   - removes the foregroundDeleteVirtualMachine finalizer from VMIs on the
//     node that are final and being deleted, which the absent agent would
//     remove after tearing the domain down (a returning agent stops
//     domains it no longer has VMIs for).
//
// A responsive Node is checked again when its heartbeat would expire.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API.
	Client client.Client
	// Events records the NodeUnresponsive events on the Node and its VMIs.
	Events record.EventRecorder
	// HeartbeatTimeout is how old a heartbeat may be; zero is
	// DefaultOptions' (KubeVirt's 5 min).
	HeartbeatTimeout time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Reconcile checks the Node req names and the VMIs on it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	timeout := r.HeartbeatTimeout
	if timeout <= 0 {
		timeout = DefaultOptions().HeartbeatTimeout
	}
	node := &corev1.Node{}
	err := r.Client.Get(ctx, req.NamespacedName, node)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("Node %s: %w", req.Name, err)
	}
	gone := err != nil
	if !gone {
		last, ok := heartbeat(node)
		if !ok {
			return ctrl.Result{}, nil // not (yet) an agent's node
		}
		if age := now().Sub(last); age <= timeout {
			return ctrl.Result{RequeueAfter: timeout - age + time.Second}, nil
		}
		if node.Labels[kubevirtv1.NodeSchedulable] != "false" {
			patch := client.MergeFrom(node.DeepCopy())
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[kubevirtv1.NodeSchedulable] = "false"
			if err := r.Client.Patch(ctx, node, patch); err != nil {
				return ctrl.Result{}, fmt.Errorf("Node %s: labelling %s=false: %w", req.Name, kubevirtv1.NodeSchedulable, err)
			}
			r.Events.Eventf(node, corev1.EventTypeWarning, NodeUnresponsiveReason,
				"the VM agent's heartbeat is %s old, marking the node unschedulable", now().Sub(last).Round(time.Second))
		}
	}
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := r.Client.List(ctx, vmis, client.MatchingLabels{kubevirtv1.NodeNameLabel: req.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("VMIs on Node %s: %w", req.Name, err)
	}
	for i := range vmis.Items {
		if err := r.release(ctx, &vmis.Items[i], req.Name); err != nil {
			return ctrl.Result{}, err
		}
	}
	if gone {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: timeout}, nil
}

// release fails vmi if it is not final, and drops its finalizer once it is
// final and being deleted.
func (r *Reconciler) release(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, node string) error {
	if vmi.Status.NodeName != node {
		return nil // the label is stale; the scheduler fixes it
	}
	key := types.NamespacedName{Namespace: vmi.Namespace, Name: vmi.Name}
	if !vmstate.Final(vmi.Status.Phase) {
		patch := client.MergeFrom(vmi.DeepCopy())
		vmi.Status.Phase = kubevirtv1.Failed
		vmi.Status.Reason = NodeUnresponsiveReason
		if err := r.Client.Status().Patch(ctx, vmi, patch); err != nil {
			return fmt.Errorf("VirtualMachineInstance %s: marking Failed: %w", key, err)
		}
		r.Events.Eventf(vmi, corev1.EventTypeNormal, NodeUnresponsiveReason,
			"the VM agent on node %s is not responsive, marking the VMI as failed", node)
		log.FromContext(ctx).Info("VMI failed: its node's agent is unresponsive", "vmi", key, "node", node)
	}
	if vmi.DeletionTimestamp != nil && controllerutil.ContainsFinalizer(vmi, kubevirtv1.VirtualMachineInstanceFinalizer) {
		patch := client.MergeFrom(vmi.DeepCopy())
		controllerutil.RemoveFinalizer(vmi, kubevirtv1.VirtualMachineInstanceFinalizer)
		if err := r.Client.Patch(ctx, vmi, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("VirtualMachineInstance %s: removing finalizer %s: %w", key, kubevirtv1.VirtualMachineInstanceFinalizer, err)
		}
	}
	return nil
}

// heartbeat parses the Node's kubevirt.io/heartbeat annotation (RFC 3339,
// as the agent and virt-handler write it); ok is false when it is absent
// or unreadable.
func heartbeat(n *corev1.Node) (time.Time, bool) {
	v, ok := n.Annotations[kubevirtv1.VirtHandlerHeartbeat]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}
