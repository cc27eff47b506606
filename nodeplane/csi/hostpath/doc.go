// Package hostpath is converge's hostpath CSI driver: the role of the
// hostpath-provisioner operator's CSI plugin (kubevirt/hostpath-provisioner,
// CSIDriver kubevirt.io.hostpath-provisioner). It serves the CSI Identity,
// Controller and Node services (github.com/container-storage-interface/spec
// v1.13.0) over gRPC on a unix socket, for volumes kept as directories in
// storage pools on the node's filesystem.
//
// Storage model. A pool is a directory named by the HostPathProvisioner CR's
// storagePools (NAME=PATH). Each volume is one directory <pool>/<volume-id>
// holding a metadata file volume.json and its data: the directory data/
// (filesystem volumes, bind-mounted on NodePublish) or the sparse file
// disk.img (block volumes, attached to a loop device whose node is
// bind-mounted on a file at the target path). Everything the driver knows is
// read back from the pools, so a restarted driver sees the same volumes and
// publications.
//
// Confinement. Every pool is opened once as an os.Root; volume files are
// only reached through it, so a volume ID or a symlink planted in a pool
// cannot make the driver create, open or remove a file outside the pool.
// Bind mounts use /proc/self/fd paths of descriptors opened through the
// root. Volume IDs are validated by ValidateVolumeID. Other agents on the
// node (the cdi-importer) reach a volume's data through LookupVolume, with
// the same checks.
//
// Topology. Volumes live on one node: NodeGetInfo and CreateVolume report
// the segment TopologyKey=<node-id>, and the controller service of a node
// only provisions on that node (run one driver per node, as upstream HPP
// does with its node-local provisioner).
package hostpath

import "github.com/converge-dev/converge/api/v1alpha1"

// Version is the driver version reported by GetPluginInfo and --version,
// set at build time with
// -ldflags "-X github.com/converge-dev/converge/nodeplane/csi/hostpath.Version=…".
var Version = "dev"

// DefaultDriverName is the CSI driver name of upstream HPP's CSIDriver
// object (kubevirt/hostpath-provisioner-operator).
const DefaultDriverName = "kubevirt.io.hostpath-provisioner"

// TopologyKey is the topology segment key naming the node a volume lives
// on; its value is the driver's node ID. It is v1alpha1.HostpathTopologyKey,
// which clients read without linking the driver.
const TopologyKey = v1alpha1.HostpathTopologyKey

// ParameterStoragePool is the CreateVolume/GetCapacity parameter (the
// StorageClass parameter of upstream HPP) naming the pool; without it the
// first configured pool is used.
const ParameterStoragePool = "storagePool"

// DefaultVolumeSize is the capacity in bytes of a volume created without a
// capacity range: 1 GiB. Filesystem volumes are not quota-limited; block
// volumes are sparse files of this size.
const DefaultVolumeSize int64 = 1 << 30
