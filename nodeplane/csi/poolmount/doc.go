// Package poolmount keeps a storage pool's directory on a PVC: it
// bind-mounts a source directory (the PVC, mounted into the container by
// the kubelet) onto a target directory (under a host path mounted into
// the container with Bidirectional propagation, so the mount shows on the
// host), keeps it there while it runs and unmounts it when told to stop.
// It is the node side of converge's HostPathProvisioner storage pool
// workers (converge-node hostpath-pool-mounter), the counterpart of
// hostpath-provisioner-operator's mounter
// (github.com/kubevirt/hostpath-provisioner-operator cmd/mounter/main.go,
// commit 03d4d6711f6acf9aaa79a5e492ee7d60b91c31b2: mountFileSystemVolume,
// bindMountPathOnHost), with two differences: upstream chroots into the
// host root and bind-mounts the kubelet's host-side mount of the PVC,
// converge bind-mounts the container's mount of it onto a target whose
// mount propagates to the host (no host root in the container, no
// findmnt or mount binaries in the image); and converge unmounts on
// termination, where upstream leaves that to a cleanup Job. Filesystem
// volumes only: upstream's block path (mkfs.xfs on the device) has no
// counterpart.
package poolmount
