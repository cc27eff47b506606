// Package virtcontroller is converge's virt-controller role: it runs in
// converge-controller next to the Sync controller (gitops/synccontroller)
// and drives the kubevirt.io/v1 VirtualMachine and VirtualMachineInstance
// objects the node agent (converge-node vm, nodeplane/vm/agent) runs.
// Setup starts its controllers, one package each, as KubeVirt's
// pkg/virt-controller/watch/*, once the VM CRDs are installed:
//
//   - vm (KubeVirt watch/vm), the VirtualMachine controller: it turns a
//     VirtualMachine into a VirtualMachineInstance per spec.runStrategy
//     (or the legacy spec.running), serves the start, stop and restart
//     requests, and writes the VM's status (printableStatus, ready,
//     created, conditions).
//   - scheduler, the VMI scheduler: it gives each new VMI (phase "" or
//     Pending, no status.nodeName) a node among the nodes labelled
//     v1alpha1.AgentLabel, as kube-scheduler would place a virt-launcher
//     pod (node selector, required node affinity, taints and tolerations,
//     CPU, memory and bridge resources against what the node offers minus
//     the VMIs already placed there), or leaves it Pending with condition
//     PodScheduled=False, reason Unschedulable and a kube-scheduler-style
//     message. Binding sets the label kubevirt.io/nodeName to the node
//     before status.nodeName, as KubeVirt's virt-controller does; the agent
//     watches on that label.
//   - nodehealth (KubeVirt watch/node), the node controller: when an
//     agent's kubevirt.io/heartbeat is older than Options.HeartbeatTimeout
//     (5 min) or its Node is gone, the Node is labelled
//     kubevirt.io/schedulable=false (the scheduler skips it), the VMIs on
//     it are Failed with reason NodeUnresponsive, and their finalizer is
//     released once they are deleted, so a runStrategy Always VM starts
//     again on another node.
//   - vmsnapshot and vmrestore (KubeVirt pkg/storage/snapshot), the VM
//     snapshot and restore controllers: a VirtualMachineSnapshot becomes a
//     VirtualMachineSnapshotContent and VolumeSnapshots, a
//     VirtualMachineRestore claims restored from them and the target VM's
//     rewritten spec. Setup starts them once the snapshot.kubevirt.io and
//     snapshot.storage.k8s.io CRDs exist too (SnapshotCRDNames).
//
// vmstate holds what the controllers and the CLI read alike from the
// KubeVirt objects (a VM's effective run strategy, a VMI's final phase).
//
// The node agent's contract, whose labels and annotations both sides take
// from api/v1alpha1 (AgentLabel, AllocatableAnnotation,
// RunStrategyAnnotation, BridgeResourcePrefix): the agent labels its Node
// AgentLabel=true and kubevirt.io/schedulable=true and renews
// kubevirt.io/heartbeat; it reports what the node offers VMs in the
// annotation AllocatableAnnotation (JSON resource list; it overrides
// status.allocatable, which a kubelet owns) or, on a node without a
// kubelet, in status.allocatable; bridge.network.kubevirt.io/<bridge>
// comes from status.allocatable (the bridge-marker writes it). Taints
// count as for pods: a node still tainted node.kubernetes.io/not-ready
// (NoSchedule) takes no VMI. The agent runs the VMIs whose status.nodeName
// is its node once their phase is Scheduled, and writes status.phase
// (Scheduled → Running → Succeeded/Failed) and the Ready condition, which
// the VM's status.ready, Ready condition and printableStatus follow. The
// VMI a VM gets carries the VM's runStrategy in RunStrategyAnnotation,
// which the agent's domain translation reads.
package virtcontroller
