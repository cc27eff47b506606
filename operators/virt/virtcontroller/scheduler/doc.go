// Package scheduler is the virt-controller role's VMI scheduler. KubeVirt
// leaves placement to kube-scheduler, which places each VMI's virt-launcher
// pod; converge runs VMs without pods, so it places the
// VirtualMachineInstances itself, with kube-scheduler's filters and
// scoring on the nodes that run converge's VM agent.
//
// Schedule (pure) gives each new VMI (Pending: phase "" or Pending, no
// status.nodeName) a node among the nodes labelled v1alpha1.AgentLabel,
// honouring spec.nodeSelector, required node affinity, tolerations against
// NoSchedule/NoExecute taints, the kubevirt.io/schedulable=false label of
// an unresponsive agent (operators/virt/virtcontroller/nodehealth), and
// CPU, memory and bridge resource requests (Requests) against the node's
// allocatable (v1alpha1.AllocatableAnnotation over status.allocatable)
// minus the VMIs already placed there; the emptiest node wins, as
// kube-scheduler's LeastAllocated. A Multus network requires its
// NetworkAttachmentDefinition's resourceName or, without one,
// v1alpha1.BridgeResourcePrefix + the bridge of a bridge plugin
// (NADResource; upstream requires the annotation). A VMI nothing can take
// stays Pending with condition PodScheduled=False, reason Unschedulable
// and a kube-scheduler-style message.
//
// Reconciler binds: it sets the label NodeNameLabel (kubevirt.io/nodeName)
// to the node before status.nodeName, as KubeVirt's virt-controller sets
// it (pkg/virt-controller/watch/vmi), since the node agent
// (nodeplane/vm/agent) watches on that label; StaleNodeLabel says when a
// bound VMI's label needs fixing. SetupWithManager registers the
// controller ("vmi-scheduler"); operators/virt/virtcontroller.Setup does
// so in converge-controller.
package scheduler
