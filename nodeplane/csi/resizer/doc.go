// Package resizer expands the volumes of a node's hostpath CSI driver when
// their PVCs ask for more storage, without the external-resizer sidecar:
// the role kubernetes-csi/external-resizer plays for a CSI driver, run
// in-process beside the driver and its provisioner in
// `converge-node hostpath-csi --kubeconfig`.
//
// Which claims. Every node runs one resizer for its own driver. It takes a
// Bound PVC whose spec.resources.requests.storage exceeds its
// status.capacity when the PVC's PV is a CSI volume of the driver, bound
// to that PVC, and its node affinity is this node's topology (the volumes
// are node-local, so only their node can grow them). The PVC's
// StorageClass must have allowVolumeExpansion: true (kube-apiserver's
// PersistentVolumeClaimResize admission refuses the request otherwise; a
// claim that got there anyway gets a VolumeResizeFailed event). The
// volume.kubernetes.io/storage-resizer annotation kube-controller-manager's
// expand controller sets is not required: the PV's driver and node decide.
//
// What it does, as external-resizer's expandAndRecover
// (pkg/controller/expand_and_recover.go, resize_status.go): it marks the
// PVC Resizing (condition Resizing, status.allocatedResources.storage the
// target size, allocatedResourceStatuses.storage ControllerResizeInProgress)
// with a Normal Resizing event, calls ControllerExpandVolume with the
// target, writes the answered capacity into the PV's spec.capacity, and
// then finishes: status.capacity the new size, the resize conditions and
// the storage allocatedResourceStatus removed, a Normal
// VolumeResizeSuccessful event. A failed ControllerExpandVolume is a
// Warning VolumeResizeFailed event and a ControllerResizeError condition
// (allocatedResourceStatuses ControllerResizeInfeasible for InvalidArgument
// and OutOfRange, e.g. a pool without room: lowering the request again
// recovers, as RecoverVolumeExpansionFailure allows), and is retried with
// backoff.
//
// Node expansion, decided for this driver. The driver answers
// node_expansion_required for block volumes, whose loop devices must take
// the new size. external-resizer would leave the PVC at
// FileSystemResizePending / NodeResizePending for the kubelet to call
// NodeExpandVolume once a pod uses the volume. Here the node plugin is the
// same process, on the volume's node, and its NodeExpandVolume finds the
// volume's loop devices by itself (any publication, or none), so the
// resizer calls it in-process right after the controller step and
// finishes the expansion at once: a running VM's disk grows without a pod
// restart, an unused volume is complete too, and the kubelet, seeing
// status.capacity equal to the PV's, has nothing left to do. Only when that
// call fails does the resizer fall back to external-resizer's hand-off
// (condition FileSystemResizePending, status NodeResizePending, event
// FileSystemResizeRequired) for the kubelet to finish.
//
// Shrinking. The API server refuses a request below status.capacity. A
// request below the PV's capacity but above status.capacity (the volume
// already grew further, e.g. an earlier expansion whose PVC status was
// lost) cannot shrink the volume: a Warning VolumeResizeFailed event says
// so and the PVC finishes at the volume's real size, which is what
// external-resizer does by resuming the larger allocated size.
package resizer
