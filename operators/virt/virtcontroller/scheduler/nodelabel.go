package scheduler

import (
	"context"
	"fmt"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeNameLabel is the label naming the node a VMI is bound to,
// kubevirt.io/nodeName (kubevirtv1.NodeNameLabel). KubeVirt's
// virt-controller sets it together with status.nodeName
// (pkg/virt-controller/watch/vmi.go) and virt-handler selects its VMIs on
// it; here the scheduler sets it when it binds a VMI, before it writes
// status.nodeName, and the node agent (nodeplane/vm/agent.APISource)
// watches the VMIs carrying its node's value.
const NodeNameLabel = kubevirtv1.NodeNameLabel

// StaleNodeLabel reports whether vmi's NodeNameLabel needs fixing: it is
// set but differs from status.nodeName (bound elsewhere, or not bound at
// all). A bound VMI without the label is not stale: it predates the label
// or was bound by hand, and the agent watches unlabelled VMIs too (adding
// the label to a running VMI would move it from one of the agent's watches
// to the other).
func StaleNodeLabel(vmi *kubevirtv1.VirtualMachineInstance) bool {
	l, ok := vmi.Labels[NodeNameLabel]
	return ok && l != vmi.Status.NodeName
}

// setNodeLabel sets vmi's NodeNameLabel to node, or removes it when node
// is "", with a merge patch of metadata.labels; vmi is updated from the
// response. Nothing is written when the label already says so.
func setNodeLabel(ctx context.Context, c client.Client, vmi *kubevirtv1.VirtualMachineInstance, node string) error {
	cur, ok := vmi.Labels[NodeNameLabel]
	if (node == "" && !ok) || (node != "" && ok && cur == node) {
		return nil
	}
	patch := client.MergeFrom(vmi.DeepCopy())
	if node == "" {
		delete(vmi.Labels, NodeNameLabel)
	} else {
		if vmi.Labels == nil {
			vmi.Labels = map[string]string{}
		}
		vmi.Labels[NodeNameLabel] = node
	}
	if err := c.Patch(ctx, vmi, patch); err != nil {
		if node == "" {
			return fmt.Errorf("VirtualMachineInstance %s/%s: removing label %s=%s: %w", vmi.Namespace, vmi.Name, NodeNameLabel, cur, err)
		}
		return fmt.Errorf("VirtualMachineInstance %s/%s: setting label %s=%s: %w", vmi.Namespace, vmi.Name, NodeNameLabel, node, err)
	}
	return nil
}
