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
// read back from the pools, so a restarted driver sees the same volumes,
// publications and snapshots.
//
// Snapshots, clones, expansion. A snapshot <id> of a volume is the
// directory <pool>/.snapshots/<id> of the volume's pool, laid out like a
// volume directory (its volume.json also records the source volume and the
// creation time); the store goes away with its last snapshot and, starting
// with '.', can never be a volume ID. CreateSnapshot copies the volume's
// data there and CreateVolume with a content source (a volume: clone; a
// snapshot: restore) copies it into the new volume. Copies share extents
// where the filesystem can (FICLONE: XFS with reflink, btrfs, ...) and are
// sparse copies otherwise (SEEK_DATA/SEEK_HOLE + copy_file_range): holes
// stay holes. A filesystem volume's tree is copied entry by entry with
// O_NOFOLLOW, symlinks as symlinks. Snapshots of a volume in use are
// crash-consistent per file, not frozen. The copy runs without the
// driver's lock; until it ends, deleting or expanding its source or target
// is Aborted (retry). ControllerExpandVolume grows a
// block volume's disk file and its attached loop devices at once (online);
// a filesystem volume, a directory without quota, only records the new
// capacity. Volumes never shrink.
//
// Confinement. Every pool is opened once as an os.Root; volume files are
// only reached through it, so a volume ID or a symlink planted in a pool
// cannot make the driver create, open or remove a file outside the pool.
// Bind mounts use /proc/self/fd paths of descriptors opened through the
// root. Volume IDs are validated by ValidateVolumeID, snapshot IDs by
// ValidateSnapshotID (the same rule); a .snapshots that is not a real
// directory is refused, never followed. Other agents on the
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
