// Package vmsnapshot is the VM snapshot controller of the virt-controller
// role, as KubeVirt's pkg/storage/snapshot VMSnapshotController
// (snapshot.go, source.go, util.go of KubeVirt v1.9.0): a
// snapshot.kubevirt.io/v1beta1 VirtualMachineSnapshot of a VirtualMachine
// locks the VM (status.snapshotInProgress and the finalizer
// snapshot.kubevirt.io/snapshot-source-protection), creates the
// VirtualMachineSnapshotContent vmsnapshot-content-<snapshot UID> holding
// the VM's metadata and spec and one volume backup per snapshottable
// volume, creates one snapshot.storage.k8s.io/v1 VolumeSnapshot per backup
// (vmsnapshot-<snapshot UID>-volume-<volume>, owned by the content, of the
// VolumeSnapshotClass of the volume's StorageClass provisioner: the only
// one, else the one annotated snapshot.storage.kubernetes.io/is-default-class),
// and reports KubeVirt's status: phase InProgress, Succeeded or Failed
// (spec.failureDeadline, default 5 min), readyToUse, creationTime,
// sourceUID, virtualMachineSnapshotContentName, error, the Progressing and
// Ready conditions with KubeVirt's reasons, indications and
// sourceIndications (Online and, since converge has no guest agent
// channel, NoGuestAgent for a running VM: its filesystems are not frozen
// and the snapshot is crash-consistent, as KubeVirt's status says), and
// snapshotVolumes (included and excluded volumes, PartialSnapshot when a
// PVC or DataVolume volume was left out). A volume is snapshotted when it
// is a persistentVolumeClaim or dataVolume volume whose claim is bound and
// whose StorageClass has a VolumeSnapshotClass; others (containerDisk,
// cloudInit, a claim without a class) are excluded, as KubeVirt does. The
// snapshot's deletion deletes the content when spec.deletionPolicy is
// Delete (the default) or the content is not ready, and keeps it with
// Retain.
//
// Where converge differs: a running VM's spec is read from the VM itself,
// not from the ControllerRevision of its VMI (converge's VM controller
// does not record VM revisions), and instancetype ControllerRevisions are
// not copied into the snapshot.
package vmsnapshot
