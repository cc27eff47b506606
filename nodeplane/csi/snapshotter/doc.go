// Package snapshotter is the csi-snapshotter sidecar of a node's hostpath
// CSI driver: upstream's sidecar controller
// (github.com/kubernetes-csi/external-snapshotter/v8 pkg/sidecar-controller,
// v8.4.0) run in-process in `converge-node hostpath-csi` beside the
// driver, its provisioner and its resizer, as csi-snapshotter
// --node-deployment runs beside a node-local driver. It talks to the
// driver over its CSI socket (pkg/snapshotter on a gRPC connection), as
// the sidecar does.
//
// Which contents. The hostpath driver's volumes live on one node, so
// snapshots are distributed as upstream's distributed snapshotting does:
// the snapshot controller (operators/hostpath/snapshotcontroller, with
// enableDistributedSnapshotting) labels each VolumeSnapshotContent it
// creates snapshot.storage.kubernetes.io/managed-by: <the node of the
// source PersistentVolume>, and each node's sidecar watches only the
// contents with its own node's label (NODE_NAME in upstream's main). On
// those it calls CreateSnapshot (the snapshot is copied into the source
// volume's pool), writes the content's status (snapshotHandle,
// readyToUse, restoreSize, creationTime) and, when a content with
// deletionPolicy Delete is deleted, DeleteSnapshot, then removes the
// content's finalizer. The node restriction policy (components/hpp
// #Driver) lets a node's sidecar write only the contents labelled with its
// node.
//
// Not run: volume group snapshots (the VolumeGroupSnapshot feature gate
// stays off, as upstream's default; no groupsnapshot CRDs are installed)
// and leader election (one sidecar per node, as upstream refuses
// --leader-election with --node-deployment).
package snapshotter
