// Package hppoperator is converge's HostPathProvisioner operator, the
// counterpart of hostpath-provisioner-operator: a thin package on
// operators/operand. For each HostPathProvisioner marked
// converge.dev/operator: native (the graph applies the CR from Git, as
// the user creates it upstream) it derives components/hpp #Roles — the
// CSIDriver kubevirt.io.hostpath-provisioner, one WaitForFirstConsumer
// StorageClass hostpath-csi-<pool> per pool (upstream leaves
// StorageClasses to the user), the provisioner's ServiceAccount and RBAC,
// and the DaemonSet hostpath-provisioner-csi running converge-node
// hostpath-csi: the CSI driver, the node's provisioner and its kubelet
// registration (node-driver-registrar's role) in one container — and, for
// each pool with a pvcTemplate and each Node its spec.workload selects
// (PoolNodes; the Nodes are the operator's input, watched), a storage pool
// worker: the PVC hpp-pool-<pool>-<node> and a Deployment of the same name
// pinned to the node running converge-node hostpath-pool-mounter. It
// applies them in the operator's namespace and writes the CR's status
// (Available, Progressing, Degraded from the DaemonSet's and the workers'
// real readiness;
// observedGeneration; phase, operatorVersion, targetVersion,
// observedVersion). Its converge-controller role is the snapshot
// controller (RoleSnapshotController, operators/hostpath/snapshotcontroller).
//
// The HostPathProvisioner's fields (hostpath-provisioner-operator
// api/v1beta1 HostPathProvisionerSpec, as converge's CRD serves it):
//
//	field                        converge
//	---------------------------  ---------------------------------------------------------------
//	imagePullPolicy              honoured: the DaemonSet's pull policy (default IfNotPresent)
//	workload                     honoured: the DaemonSet's nodeSelector, affinity, tolerations
//	storagePools[].name, .path   honoured: one --storage-pool NAME=PATH each, in order (the first
//	                             is the default), the host path mounted at the same path with
//	                             Bidirectional propagation, a StorageClass each; a name or path
//	                             converge-node hostpath-csi refuses, duplicates or no pool refused
//	storagePools[].pvcTemplate   honoured, as upstream's storage pool workers (storagepool.go,
//	                             commit 03d4d6711f6acf9aaa79a5e492ee7d60b91c31b2): per selected
//	                             node a PVC from the template and a Deployment pinned to the node
//	                             (node affinity on metadata.name) whose mounter, converge-node
//	                             hostpath-pool-mounter, bind-mounts it at <path>/csi on the host
//	                             (Bidirectional propagation) and unmounts it on SIGTERM; the driver
//	                             keeps the pool in <path>/csi and serves it only once that is a
//	                             mount point (--mounted-pool). The PVC (converge.dev/prune:
//	                             disabled) stays when its node leaves the placement, the pool
//	                             goes or the CR is deleted, as upstream keeps it; only the worker
//	                             goes. Refused: no resources.requests.storage, volumeMode
//	                             Block, ReadWriteMany (upstream's shared overlay pools)
//	pathConfig                   refused: the legacy, non-CSI provisioner has no counterpart
//	featureGates                 refused: converge's driver has none
//
// A refused field makes the CR Degraded (reason UnsupportedConfiguration)
// and nothing is applied until it changes; what ran before keeps running.
// The status carries no storagePoolStatuses (upstream's per-pool phases
// and the pool workers' claims): the workers' readiness shows in the
// conditions only.
package hppoperator
