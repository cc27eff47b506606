package images

// NonrootUID is the user and group converge-controller runs as: the
// runAsUser/runAsGroup of its Deployment (components/controller) and the
// "nonroot" user of the distroless images.
const NonrootUID = 65532

// controllerPasswd and controllerGroup are the controller image's
// /etc/passwd and /etc/group: root and nonroot (65532), as
// gcr.io/distroless/static's.
const (
	controllerPasswd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	controllerGroup = "root:x:0:\n" +
		"nonroot:x:65532:\n"
)

// nodePasswd and nodeGroup are the node image's /etc/passwd and
// /etc/group. converge-node's containers run as root, and so does QEMU
// (converge-node libvirtd writes qemu.conf with user = "root"). libvirtd
// 9.0 still resolves its compiled-in QEMU user and group at start (Debian
// builds it with user and group libvirt-qemu): run in the image's root
// without them it stops with "Failed to parse user 'libvirt-qemu'", then,
// with the user alone, "Failed to parse group 'libvirt-qemu'"; with both
// it starts and probes QEMU. Nothing else is looked up: no kvm group
// (QEMU as root opens /dev/kvm; a kvm gid here would not be the host's,
// which udev allocates) and no libvirt group (converge's libvirtd.conf
// sets no unix_sock_group). The ids are those Debian's
// libvirt-daemon-system postinst allocates (LIBVIRT_QEMU_UID and _GID
// 64055); the shells do not exist in the image, whose packages bring no
// shell.
const (
	nodePasswd = "root:x:0:0:root:/root:/bin/sh\n" +
		"libvirt-qemu:x:64055:64055:Libvirt Qemu:/var/lib/libvirt:/usr/sbin/nologin\n"
	nodeGroup = "root:x:0:\n" +
		"libvirt-qemu:x:64055:libvirt-qemu\n"
)
