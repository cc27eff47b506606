// Package nodehealth is the virt-controller role's node controller, after
// KubeVirt's pkg/virt-controller/watch/node: it watches the nodes that run
// converge's VM agent (label v1alpha1.AgentLabel) and, when an agent's
// kubevirt.io/heartbeat is older than Options.HeartbeatTimeout (KubeVirt's
// 5 min) or its Node is gone, labels the Node kubevirt.io/schedulable=false
// (the VMI scheduler, operators/virt/virtcontroller/scheduler, then skips
// it), fails the VMIs on it with reason NodeUnresponsive, and releases their
// finalizer once they are deleted, so that a runStrategy Always VM starts
// again on another node (operators/virt/virtcontroller/vm).
//
// SetupWithManager registers the controller ("vmi-node-health");
// operators/virt/virtcontroller.Setup does so in converge-controller.
package nodehealth
