// Package provisioner provisions PersistentVolumes for PVCs of a CSI
// driver's StorageClasses without the external-provisioner sidecar: the
// role csi-provisioner plays with --node-deployment next to upstream HPP's
// CSI plugin (kubevirt/hostpath-provisioner deploy), run in-process in
// `converge-node hostpath-csi --kubeconfig`.
//
// Distributed provisioning. Every node runs one provisioner for its own
// driver. It provisions only PVCs whose volume.kubernetes.io/selected-node
// annotation (set by kube-scheduler for WaitForFirstConsumer classes) names
// its node, and deletes only PVs whose node affinity is its node's topology.
// StorageClasses with volumeBindingMode Immediate are refused with a
// ProvisioningFailed event: node-local volumes need the scheduler to pick
// the node first, as upstream HPP documents (README "Storage Class").
//
// The controller loop (informers, claim and volume work queues, events,
// the PV finalizer, retries) is sigs.k8s.io/sig-storage-lib-external-provisioner
// v13, the library csi-provisioner is built on. CreateVolume and
// DeleteVolume go straight to the driver's CSI Controller service, in the
// same process: no socket hop, no gRPC marshalling, and no window in which
// the provisioner runs without its driver.
//
// The PV follows csi-provisioner's (kubernetes-csi/external-provisioner
// pkg/controller/controller.go Provision): name pvc-<claim UID>, the CSI
// source (driver, volumeHandle, fsType for filesystem volumes, the
// volume context as volumeAttributes), capacity from the CreateVolume
// answer, access modes and volume mode from the claim, reclaim policy and
// mount options from the StorageClass, node affinity from the volume's
// accessible topology.
//
// Clones. A claim whose spec.dataSource (or spec.dataSourceRef, same
// namespace only) is a PersistentVolumeClaim gets a CSI clone of that
// claim's volume: CreateVolume with the source volume as content source
// (the driver copies by reflink, else sparse copy), checked first as
// csi-provisioner's getPVCSource does: the source Bound, not being deleted,
// bound to a PV of this driver, of the same volume mode, and its request
// not above the clone's. The volumes are node-local, so a clone is made
// only on its source's node: a clone whose selected node is another node
// is refused there (InvalidArgument: a ProvisioningFailed event naming
// both nodes, retried slowly, never rescheduled). A source not ready yet
// is retried with the library's backoff. There is no cloning-protection
// finalizer on the source (csi-provisioner's CloningProtectionController):
// the copy runs inside the synchronous in-process CreateVolume, and the
// driver answers Aborted to deleting a volume being copied from, so the
// source's volume outlives the copy anyway. Any other kind is left to its
// volume populator.
//
// Restores. A claim whose data source is a snapshot.storage.k8s.io
// VolumeSnapshot (Options.Snapshots set; refused without it) gets
// CreateVolume with the snapshot handle of the snapshot's bound
// VolumeSnapshotContent as content source, checked as csi-provisioner's
// getSnapshotSource: the snapshot not being deleted, bound to a content
// bound back to it, of this driver, with a snapshot handle, readyToUse,
// and a restoreSize not above the claim's request. What may become ready
// is retried (FailedPrecondition); a content of another driver or a
// too-small request is final (InvalidArgument). converge-node hostpath-csi
// sets Options.Snapshots, beside the node's csi-snapshotter
// (nodeplane/csi/snapshotter); internal/e2e/cluster TestHostpathSnapshot
// restores a snapshot taken by the deployed controllers. A snapshot on another
// node than the claim's is not refused up front as a clone is: its
// CreateVolume fails (snapshot not in the node's pools) and is retried.
package provisioner
