package v1alpha1

// The well-known labels and annotations of the VM and network contract
// between converge's virt-controller role (operators/virt/virtcontroller,
// in converge-controller) and the node agents (converge-node vm,
// nodeplane/vm/agent; converge-node bridge-marker,
// nodeplane/network/bridgemarker). Both sides take the names from here, so
// neither imports the other.
const (
	// AgentLabel marks the Nodes that run converge's VM agent
	// (converge-node vm). Written by the agent, which sets it to "true" on
	// its Node when it registers (together with KubeVirt's
	// kubevirt.io/schedulable=true, and renewing kubevirt.io/heartbeat).
	// Read by the virt-controller role: only Nodes labelled
	// AgentLabel=true are candidates for VMIs, and its node health check
	// watches only them.
	AgentLabel = "converge.dev/vm-agent"

	// AllocatableAnnotation on a Node is what the node offers VMs, as a
	// JSON resource list ({"cpu":"3","memory":"20Gi"}). Written by the VM
	// agent when it registers its Node (the host's CPUs and memory minus
	// the reserve). Read by the VMI scheduler: its entries override the
	// Node's status.allocatable, which a kubelet owns when the node has
	// one; a node without the annotation offers its status.allocatable,
	// and a value that does not parse is ignored (status.allocatable is
	// used).
	AllocatableAnnotation = "vm.converge.dev/allocatable"

	// RunStrategyAnnotation on a VMI carries the runStrategy of the
	// VirtualMachine that owns it (KubeVirt's VMI has no such field).
	// Written by the virt-controller role when it creates the VMI of a VM.
	// Read by the VM agent's domain translation (nodeplane/vm/domain):
	// with "Once" a guest reboot ends the VMI (on_reboot=destroy, phase
	// Succeeded); otherwise a reboot stays inside the same VMI
	// (on_reboot=restart), as in KubeVirt.
	RunStrategyAnnotation = "vm.converge.dev/run-strategy"

	// BridgeResourcePrefix, followed by a Linux bridge name, is the
	// extended Node resource of that bridge, e.g.
	// bridge.network.kubevirt.io/br0 (upstream bridge-marker, deployed by
	// cluster-network-addons-operator). Written by the bridge-marker
	// (converge-node bridge-marker) into the Node's status.capacity and
	// status.allocatable, one per bridge the node has (capacity 1000).
	// Read by the VMI scheduler: a VMI on a Multus network whose
	// NetworkAttachmentDefinition is a bridge (or names the resource)
	// needs one unit of it, so it is only placed on a node that has the
	// bridge.
	BridgeResourcePrefix = "bridge.network.kubevirt.io/"

	// MasqueradeBridgeMAC is the MAC of the bridge of KubeVirt's
	// masquerade binding inside a VMI's network namespace (KubeVirt's
	// StaticMasqueradeBridgeMAC, pkg/network/link). Read by the VM agent's
	// domain translation (nodeplane/vm/domain), which refuses it as a
	// masquerade NIC's MAC as KubeVirt's admitter does, and by the MAC
	// pool (operators/network/macpool), which never hands it out, so a
	// range starting at 02:00:00:00:00:00 (HCO's documented example) does
	// not give a VM the bridge's address.
	MasqueradeBridgeMAC = "02:00:00:00:00:00"
)
