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
// Volumes (volumes.go, claims.go): KubeVirt leaves them to kube-scheduler's
// VolumeBinding plugin and its VMI controller; here the scheduler does
// both. A VMI whose persistentVolumeClaim or dataVolume volumes name a PVC
// that does not exist, or one a DataVolume has not populated yet, waits
// (WaitForVolumes: KubeVirt's Synchronized=False FailedPvcNotFound,
// DataVolumesReady=False). A claim bound to a PersistentVolume restricts
// the VMI to the nodes its node affinity allows (the hostpath CSI
// driver's volumes live on one node; the kubelet labels each node with
// the driver's topology key); an unbound claim of immediate binding makes
// the VMI unschedulable; an unbound WaitForFirstConsumer claim gets the
// chosen node as volume.kubernetes.io/selected-node, as kube-scheduler
// sets it, and the VMI is bound once its provisioner bound the claim
// there (ScheduleWithClaims, Claims).
//
// Reconciler binds: it sets the label NodeNameLabel (kubevirt.io/nodeName)
// to the node before status.nodeName, as KubeVirt's virt-controller sets
// it (pkg/virt-controller/watch/vmi), since the node agent
// (nodeplane/vm/agent) watches on that label; StaleNodeLabel says when a
// bound VMI's label needs fixing. SetupWithManager registers the
// controller ("vmi-scheduler"); operators/virt/virtcontroller.Setup does
// so in converge-controller.
package scheduler
