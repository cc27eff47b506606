// Package snapshotcontroller is the snapshot controller of
// snapshot.storage.k8s.io (VolumeSnapshot → VolumeSnapshotContent →
// the node's csi-snapshotter → CSI CreateSnapshot), run in
// converge-controller as the HostPathProvisioner operator's
// "snapshot-controller" role: upstream's common controller
// (github.com/kubernetes-csi/external-snapshotter/v8
// pkg/common-controller, v8.4.0, the snapshot-controller Deployment's
// code) on converge-controller's credentials, started by the leader once
// the snapshot CRDs (applied in the graph's crds stage, internal/snapshotcrds)
// are established and a native HostPathProvisioner exists.
//
// It runs with enableDistributedSnapshotting, as upstream documents for a
// node-local driver: each VolumeSnapshotContent it creates for a dynamic
// snapshot gets the label snapshot.storage.kubernetes.io/managed-by naming
// the node its source PersistentVolume's node affinity selects, and only
// that node's csi-snapshotter (nodeplane/csi/snapshotter, in converge-node
// hostpath-csi) takes it. preventVolumeModeConversion is on (upstream's
// default); volume group snapshots are off (the VolumeGroupSnapshot gate's
// default; no groupsnapshot CRDs are installed).
//
// Who owns it. In OpenShift the snapshot controller comes with the
// platform (cluster-csi-snapshot-controller-operator), not with HCO; on
// plain Kubernetes the distribution or the user installs it. converge
// ships the only CSI driver its stack uses, the HostPathProvisioner's, so
// the controller runs while a native HostPathProvisioner does: do not
// run another snapshot-controller in the same cluster.
package snapshotcontroller
