// Package guestimage serves the end-to-end test guest of hack/guest
// (bin/guest, built by vmtest.BuildGuest) the ways a KubeVirt VM gets its
// disk, for the tests that boot it from one:
//
//   - FileServer serves disk.img and disk.qcow2 over HTTP, the source of
//     a DataVolume's spec.source.http import (CDI's importer, converge's
//     cdi-importer node agent);
//   - ContainerDisk wraps disk.qcow2 into an OCI image laid out as
//     KubeVirt's containerDisks (one layer, /disk/<file>, mode 0440,
//     owned by 107:107, the qemu user of KubeVirt's virt-launcher), and
//     Registry serves it from an OCI registry in the test process
//     (go-containerregistry's pkg/registry), over plain HTTP
//     (StartRegistry) or over HTTPS with a certificate of a CA of its
//     own (StartTLSRegistry, the CA in Registry.CAPEM);
//   - NoCloudISO makes the cloud-init NoCloud disk KubeVirt makes of a
//     cloudInitNoCloud volume (ISO 9660 with Rock Ridge, volume label
//     cidata, /user-data and /meta-data; go-diskfs), for a test that
//     attaches it as a plain disk.
//
// The servers listen on an address the caller gives: 127.0.0.1 for a
// process on the host or a hostNetwork pod, the cluster's node address
// (internal/testing/cluster.NodeIP) for pods on the pod network.
//
// Nothing shipped links this package: it is test support.
package guestimage

// The guest's files under bin/guest (hack/guest).
const (
	// DiskImage is the raw bootable disk (a FAT file system with SYSLINUX).
	DiskImage = "disk.img"
	// DiskQCOW2 is the same disk as compressed qcow2.
	DiskQCOW2 = "disk.qcow2"
)

// Markers are the lines the guest prints on its serial console
// (hack/guest/init.sh): each is followed by a space and its fields.
const (
	// MarkerOK is printed every 2 s: "<hostname> <kernel release> tick=<n>".
	MarkerOK = "CONVERGE-GUEST-OK"
	// MarkerUserData precedes each line of the cloud-init user data.
	MarkerUserData = "CONVERGE-GUEST-USERDATA"
	// MarkerCloudInit says which cloud-init disk the guest read:
	// "nocloud <device>", "configdrive <device>" or "none".
	MarkerCloudInit = "CONVERGE-GUEST-CLOUDINIT"
	// MarkerDHCP is printed once per DHCP lease: "<hostname>
	// ip=ADDR/PREFIX router=GW".
	MarkerDHCP = "CONVERGE-GUEST-DHCP"
	// MarkerDisk is printed for each virtio disk at boot and whenever its
	// size changes: "<vdX> <bytes>".
	MarkerDisk = "CONVERGE-GUEST-DISK"
	// MarkerData is printed at boot, after the cloud-init data, for each
	// virtio disk whose first sector starts with the line
	// DataPrefix+"<text>": "<vdX> <text>".
	MarkerData = "CONVERGE-GUEST-DATA"
	// MarkerWrote confirms a user-data directive "converge-write <vdX>
	// <text>" (WriteDirective): the guest wrote DataPrefix+"<text>" and a
	// newline into the disk's first sector: "<vdX> <text>".
	MarkerWrote = "CONVERGE-GUEST-WROTE"
)

// DataPrefix starts the first sector of a disk whose content the guest
// prints at boot (MarkerData).
const DataPrefix = "CONVERGE-DATA "

// WriteDirective is the user-data line that makes the guest write
// DataPrefix+text into the first sector of its virtio disk dev ("vdb"),
// as a user's guest changes its own disk; MarkerWrote confirms it.
func WriteDirective(dev, text string) string { return "converge-write " + dev + " " + text }

// DataDisk gives the content of a raw disk image of size bytes whose
// first sector starts with DataPrefix+text and a newline, zeros after:
// the guest prints MarkerData+" <vdX> "+text at boot.
func DataDisk(text string, size int) []byte {
	b := make([]byte, size)
	copy(b, DataPrefix+text+"\n")
	return b
}
