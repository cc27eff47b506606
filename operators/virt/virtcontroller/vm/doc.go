// Package vm is the virt-controller role's VirtualMachine controller, after
// KubeVirt's pkg/virt-controller/watch/vm: it keeps each kubevirt.io/v1
// VirtualMachine's VirtualMachineInstance in line with the VM's
// spec.runStrategy (or the legacy spec.running), creating, deleting and
// recreating it (Decide), serves the start, stop and restart requests
// queued in status.stateChangeRequests (StateChange), and writes the VM's
// status: printableStatus (PrintableStatus), ready, created, runStrategy
// and the Ready, PodScheduled and Failure conditions, which follow the
// VMI's phase and conditions as the node agent (nodeplane/vm/agent) and
// the VMI scheduler (operators/virt/virtcontroller/scheduler) write them.
// The VMI a VM gets (NewVMI) carries the VM's run strategy in
// v1alpha1.RunStrategyAnnotation for the agent's domain translation. A VM
// naming an instancetype or preference (instancetype.kubevirt.io) gets
// them stored in ControllerRevisions it owns first, and its VMI has them
// expanded (instancetype.go, after KubeVirt's instancetype controller;
// the logic is package operators/virt/instancetype).
//
// DataVolumes (datavolumes.go, after KubeVirt vm.go handleDataVolumes and
// ClaimMatchedDataVolumes): the controller creates the DataVolume of each
// spec.dataVolumeTemplates entry (NewDataVolume: the template's name in the
// VM's namespace, controlled by the VM, so that deleting the VM deletes
// them through the garbage collector), adopts an orphan of that name, and
// starts no VMI until they are Succeeded; a changed template does not
// change an existing DataVolume, as in KubeVirt. The VM's printableStatus
// then reads Provisioning, DataVolumeError, WaitingForVolumeBinding or
// ErrorPvcNotFound (PrintableStatusWithVolumes, from the DataVolumes and
// PVCs of its template's volumes: VolumeStatusOf).
//
// SetupWithManager registers the controller ("virtualmachine");
// operators/virt/virtcontroller.Setup does so in converge-controller.
package vm
