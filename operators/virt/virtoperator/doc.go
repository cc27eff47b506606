// Package virtoperator is converge's virt operator, upstream's
// virt-operator for converge: it consumes the KubeVirt CRs marked native
// through the operand framework. From each one it derives the VM agent's
// DaemonSet (converge-node vm beside its own converge-node libvirtd),
// ServiceAccount and RBAC (components/virt #Roles), applies them and
// reports the CR's status as virt-operator does (phase Deploying/Deployed,
// Available/Progressing/Degraded, observedGeneration, operatorVersion,
// target/observed KubeVirt version and registry). It gates
// converge-controller's virt roles on a native KubeVirt CR: virt-controller
// (operators/virt/virtcontroller: the VM controller, the VMI scheduler, node
// health) and the VM validation webhook (operators/virt/vmadmission), and
// hands them the CR's configuration they honour (Config:
// cpuAllocationRatio and memoryOvercommit for the scheduler's requests,
// obsoleteCPUModels for the webhook). docs/native-operators.md lists every
// KubeVirt field converge honours, refuses or accepts without effect.
package virtoperator
