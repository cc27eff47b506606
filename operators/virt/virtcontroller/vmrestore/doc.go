// Package vmrestore is the VM restore controller of the virt-controller
// role, as KubeVirt's pkg/storage/snapshot VMRestoreController (restore.go
// of KubeVirt v1.9.0): a snapshot.kubevirt.io/v1beta1
// VirtualMachineRestore of a ready VirtualMachineSnapshot restores its
// VirtualMachineSnapshotContent into spec.target, a VirtualMachine that is
// either the snapshot's source or does not exist yet (KubeVirt ≥ v1.3
// creates it, after applying spec.patches, JSON patches of the VM
// manifest; an existing VM other than the source is refused with
// KubeVirt's message). A target that runs (has a VMI) is waited for per
// spec.targetReadinessPolicy: WaitGracePeriod (the default: KubeVirt's
// message, Failed after 5 min), WaitEventually, FailImmediate, or
// StopTarget (converge sets its runStrategy Halted, as virtctl stop
// does). Then, as KubeVirt: status.restores names one PVC per volume
// backup (restore-<restore UID>-<volume>, or per volumeRestorePolicy and
// volumeRestoreOverrides), each created from its VolumeSnapshot (dataSource
// and dataSourceRef, at least the snapshot's restoreSize) with the source
// claim's labels and annotations less the provisioning ones, labels
// restore.kubevirt.io/source-vm-name and -namespace; the target's spec
// becomes the snapshot's with those claims in its volumes, annotated
// restore.kubevirt.io/lastRestoreUID; an existing target keeps its run
// strategy, a new one is Halted; DataVolumes no longer referenced are
// listed in status.deletedDataVolumes and deleted; status.complete,
// restoreTime and the Progressing and Ready conditions follow KubeVirt's
// reasons.
//
// Where converge differs: a dataVolume volume whose DataVolume came from
// the VM's dataVolumeTemplates is restored as a persistentVolumeClaim
// volume of the restored claim and its template dropped (KubeVirt keeps a
// DataVolume template of the restored name and marks the DataVolume
// prePopulated, which converge's DataVolume controller does not honour
// yet); the claim is owned by the target VM (volumeOwnershipPolicy Vm, the
// default; None leaves it unowned), so it goes with the VM as the
// DataVolume would. volumeRestorePolicy InPlace is refused naming the
// field, and so is a PrefixTargetName name over 63 characters (KubeVirt
// shortens it with a hash). Instancetype ControllerRevisions are not
// copied, and the legacy firmware UUID KubeVirt pins on a VM restored
// into itself is not set.
package vmrestore
