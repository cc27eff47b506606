// Package domain translates a KubeVirt VirtualMachineInstance
// (kubevirt.io/api/core/v1, v1.9.0) into the libvirt domain that runs it on
// a converge node (libvirt.org/go/libvirtxml): converge's virt-launcher role,
// as pure Go with no cgo and no libvirt connection.
//
// Build does the translation; Options carries what the node decides (domain
// type, QEMU binary, machine type, serial log directory, and resolvers for
// PVC and node-prepared volumes and network bridges). The domain is named
// "<namespace>_<name>" like KubeVirt's and carries converge's Metadata so the
// agent recognises its own domains.
//
// What the domain looks like:
//
//   - type qemu (TCG) unless Options say otherwise; never kvm by itself;
//   - UUID from spec.domain.firmware.uuid, else metadata.uid;
//   - memory from memory.guest, else resources.requests.memory, in KiB;
//   - vCPUs from the cpu topology (sockets × cores × threads, each default
//     1), else resources.limits.cpu rounded up, else 1;
//   - os: x86_64, machine q35 by default; SeaBIOS, or EFI through libvirt's
//     firmware autoselection, or direct kernel boot from a node directory;
//   - acpi and apic on; clock UTC;
//   - on_poweroff destroy (the VMI Succeeds), on_crash destroy (the VMI
//     Fails), on_reboot restart, or destroy when the owning VM's runStrategy
//     is Once (v1alpha1.RunStrategyAnnotation);
//   - disks: raw or qcow2 images (the driver type follows
//     DiskSource.Format) or block devices, with user aliases
//     "ua-<disk name>": hostDisk paths; persistentVolumeClaim and
//     dataVolume volumes (the DataVolume's PVC, named after it) through
//     Options.ResolvePVC; the volumes the node prepares (containerDisk
//     overlays, emptyDisk images, cloud-init, secret and configMap ISOs)
//     through Options.ResolveVolume. A resolver's error wrapping
//     ErrVolumeNotReady makes Build's error wrap it too, when nothing
//     else is refused, so that the agent retries;
//   - interfaces: masquerade (pod network) and bridge bindings, each a tap
//     Options.ResolveTap gives (the agent's network setup plumbs it) or, for
//     bridge, the bridge Options.ResolveBridge names; KubeVirt's default
//     interface (PodInterfaceDefault) when the node has a pod network; MAC
//     from the spec or derived (MAC), virtio by default, aliases
//     "ua-<interface name>";
//   - a pty serial console (ttyS0) logged to a file, a virtio balloon, and
//     virtio-rng when spec.domain.devices.rng is set.
//
// # Support table
//
// Which VMI spec fields converge honours, ignores or refuses is the support
// table of api/vmisupport (vmisupport.SupportTable, docs/vmi-support.md),
// which the VM validation webhook (operators/virt/vmadmission) applies at
// admission too. Build starts with vmisupport.CheckSpec, then checks the
// values; every field it cannot honour is reported, all at once, as
// vmisupport.FieldErrors, for example
//
//	VirtualMachineInstance default/vm1: spec.domain.devices.gpus: not supported by converge
//
// A VMI is never run differently from what it asks for.
package domain
