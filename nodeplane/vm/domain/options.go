package domain

import (
	"errors"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// DiskSource is where a volume's data is on the node: Path is an absolute
// path to an image file, or to a block device when Block is true, and
// Format the image format QEMU reads it with (the disk driver type):
// "raw" (also when empty) or "qcow2". Capacity, when not 0, is the size
// in bytes the volume offers the guest (its claim's status.capacity, for
// Filesystem and Block volumes alike): the VM agent grows a running domain's raw disk to it
// when the volume has grown (agent: disk expansion).
type DiskSource struct {
	Path     string
	Block    bool
	Format   string
	Capacity int64
}

// Disk image formats of DiskSource.Format.
const (
	FormatRaw   = "raw"
	FormatQCOW2 = "qcow2"
)

// ErrVolumeNotReady is wrapped by a resolver's error when the volume
// exists but cannot be used yet (a PVC not bound yet, a DataVolume still
// importing, the API server out of reach): Build's error then wraps it
// too, when no other field is refused, so the agent retries instead of
// failing the VMI.
var ErrVolumeNotReady = errors.New("volume not ready")

// Options are the node-side choices Build needs and a VMI does not carry.
// Start from DefaultOptions.
type Options struct {
	// DomainType is the libvirt domain type: "qemu" (TCG), "kvm", or "test"
	// for libvirt's test driver. converge never picks kvm by itself: on the
	// machines of this project /dev/kvm exists but cannot run standard guests.
	DomainType string
	// Emulator is the QEMU binary path; empty leaves it to libvirt.
	Emulator string
	// MachineType is used when the VMI does not set spec.domain.machine.type.
	MachineType string
	// SMBIOS is the system information every guest reads (dmidecode),
	// KubeVirt CR spec.configuration.smbios; nil writes none.
	SMBIOS *SMBIOS
	// SerialLogDir receives <namespace>_<name>-serial.log, a copy of the
	// serial console written by virtlogd; empty disables the log.
	SerialLogDir string
	// ResolvePVC gives the disk for a persistentVolumeClaim volume of a VMI
	// in namespace, and for a dataVolume volume (CDI names the PVC after
	// its DataVolume, so claimName is the DataVolume's name). Nil refuses
	// every PVC and DataVolume volume.
	ResolvePVC func(namespace, claimName string) (DiskSource, error)
	// ResolveVolume gives the disk of a volume the node prepares itself:
	// containerDisk, emptyDisk, cloudInitNoCloud, cloudInitConfigDrive,
	// secret and configMap (nodeplane/vm/vmdisks, whose
	// Prepare creates the files before the domain is defined). An error
	// that is or wraps vmisupport.FieldErrors names fields relative to the
	// volume's source (spec.volumes[i].<source>). Nil refuses those
	// volumes.
	ResolveVolume func(vmi *kubevirtv1.VirtualMachineInstance, volume kubevirtv1.Volume) (DiskSource, error)
	// ResolveBridge gives the name of the node's Linux bridge for a network
	// of a VMI in namespace (pod or multus). Nil refuses every interface.
	ResolveBridge func(namespace string, network kubevirtv1.Network) (string, error)
	// ResolveTap, when set, is asked first for each bridge-bound interface
	// of a VMI in namespace. ok means the interface is a tap that libvirt
	// creates unattached (<interface type='ethernet'> with
	// <target dev=Tap.Name managed='yes'/> and Tap.MTU), which the VM agent
	// then binds to the network's CNI interface inside the VMI's network
	// namespace; !ok falls back to ResolveBridge.
	ResolveTap func(namespace string, network kubevirtv1.Network) (tap Tap, ok bool, err error)
}

// SMBIOS is KubeVirt's SMBiosConfiguration (kubevirt.io/api core/v1
// SMBiosConfiguration): the manufacturer, family, product, SKU and version
// written into every domain's SMBIOS system table, as virt-launcher's
// converter does (pkg/virt-launcher/virtwrap/converter/converter.go,
// "c.SMBios"). An empty field is written empty, as KubeVirt writes it.
type SMBIOS struct {
	Manufacturer, Family, Product, SKU, Version string
}

// DefaultSMBIOS is KubeVirt's default SMBIOS configuration, which HCO
// also sets in the KubeVirt CR (pkg/virt-config/virt-config.go
// SmbiosConfigDefault*: family KubeVirt, manufacturer KubeVirt, product
// None).
var DefaultSMBIOS = SMBIOS{Manufacturer: "KubeVirt", Family: "KubeVirt", Product: "None"}

// Tap is a VM NIC's host side when it is not on a node bridge: the tap's
// name (at most 15 bytes, as every Linux interface name) and the MTU
// (bytes; 0 leaves libvirt's default) given to the tap and, through
// virtio's host_mtu, to the guest.
type Tap struct {
	Name string
	MTU  int
}

// DefaultOptions gives domain type qemu, the Debian QEMU binary
// /usr/bin/qemu-system-x86_64, machine type q35, KubeVirt's default
// SMBIOS, no serial log and no resolvers (PVC, DataVolume and
// node-prepared volumes and interfaces are refused until set).
func DefaultOptions() Options {
	smbios := DefaultSMBIOS
	return Options{
		DomainType:  "qemu",
		Emulator:    "/usr/bin/qemu-system-x86_64",
		MachineType: "q35",
		SMBIOS:      &smbios,
	}
}
