// Package vmisupport is converge's VMI support table: which fields of a
// KubeVirt VirtualMachineInstance spec (kubevirt.io/api/core/v1, v1.9.0)
// converge runs, ignores or refuses. It is the contract between the VM
// validation webhook (operators/virt/vmadmission, in converge-controller),
// which refuses a VirtualMachine or VMI at admission, and the node agent's
// domain translation (nodeplane/vm/domain.Build), whose refusal marks a
// VMI that reaches a node anyway Failed: both call CheckSpec, and neither
// side imports the other. docs/vmi-support.md is generated from
// SupportTable.
//
// Every VMI spec field is supported, ignored (accepted, with no effect on
// a converge node, for the reason given) or rejected. A field set in a VMI
// that is rejected, or is missing from the table, is a FieldError with its
// path, for example
//
//	VirtualMachineInstance default/vm1: spec.domain.devices.gpus: not supported by converge
//
// A VMI is never run differently from what it asks for. "[*]" is any list
// index. SupportTable returns the same rows; the test keeps this comment in
// step with it.
//
// BEGIN SUPPORT TABLE
//
//	spec                                                           supported
//	spec.accessCredentials                                         rejected  no guest agent
//	spec.affinity                                                  rejected  the scheduler has nodeSelector and tolerations only
//	spec.architecture                                              supported amd64 only
//	spec.dnsConfig                                                 supported
//	spec.dnsConfig.nameservers                                     supported offered by DHCP after the node's (IPv4 ones: DHCPv4 carries no other)
//	spec.dnsConfig.options                                         rejected  DHCP carries no resolver options: configure them in the guest
//	spec.dnsConfig.searches                                        supported offered by DHCP after the node's
//	spec.dnsPolicy                                                 supported None: the DHCP name servers and search list are dnsConfig's only, with any other policy the agent's resolv.conf (converge-node vm --pod-network-resolv-conf) followed by dnsConfig's
//	spec.domain                                                    supported
//	spec.domain.chassis                                            rejected
//	spec.domain.clock                                              rejected  the guest clock is UTC
//	spec.domain.cpu                                                supported
//	spec.domain.cpu.cores                                          supported default 1
//	spec.domain.cpu.dedicatedCpuPlacement                          rejected  no CPU pinning
//	spec.domain.cpu.features                                       rejected
//	spec.domain.cpu.isolateEmulatorThread                          rejected
//	spec.domain.cpu.maxSockets                                     rejected  no CPU hotplug
//	spec.domain.cpu.model                                          supported a named QEMU CPU model (mode=custom, fallback=forbid): host-model and host-passthrough are refused with domain type qemu (TCG), and unset means the hypervisor's default model
//	spec.domain.cpu.numa                                           rejected
//	spec.domain.cpu.realtime                                       rejected
//	spec.domain.cpu.sockets                                        supported default 1
//	spec.domain.cpu.threads                                        supported default 1
//	spec.domain.devices                                            supported
//	spec.domain.devices.autoattachGraphicsDevice                   ignored   converge domains are headless: use the serial console
//	spec.domain.devices.autoattachInputDevice                      ignored   converge domains are headless
//	spec.domain.devices.autoattachMemBalloon                       supported default true: a virtio balloon
//	spec.domain.devices.autoattachPodInterface                     supported default true, as in KubeVirt: a VMI with no interfaces and no networks gets the interface default with masquerade on the pod network when its node has one (else no NIC), and true on a node without a pod network is refused
//	spec.domain.devices.autoattachSerialConsole                    supported default true: a pty serial console on ttyS0
//	spec.domain.devices.autoattachVSOCK                            rejected
//	spec.domain.devices.blockMultiQueue                            rejected
//	spec.domain.devices.clientPassthrough                          rejected
//	spec.domain.devices.disableHotplug                             ignored   converge has no hotplug
//	spec.domain.devices.disks                                      supported
//	spec.domain.devices.disks[*].blockSize                         rejected
//	spec.domain.devices.disks[*].bootOrder                         supported
//	spec.domain.devices.disks[*].cache                             supported none, writethrough or writeback (unset: libvirt's default)
//	spec.domain.devices.disks[*].cdrom                             supported
//	spec.domain.devices.disks[*].cdrom.bus                         supported sata (default)
//	spec.domain.devices.disks[*].cdrom.readonly                    supported must be true (the default)
//	spec.domain.devices.disks[*].cdrom.tray                        rejected
//	spec.domain.devices.disks[*].dedicatedIOThread                 rejected
//	spec.domain.devices.disks[*].disk                              supported the default device type
//	spec.domain.devices.disks[*].disk.bus                          supported virtio (default) or sata
//	spec.domain.devices.disks[*].disk.pciAddress                   rejected
//	spec.domain.devices.disks[*].disk.readonly                     supported
//	spec.domain.devices.disks[*].errorPolicy                       rejected
//	spec.domain.devices.disks[*].io                                supported native or threads
//	spec.domain.devices.disks[*].lun                               rejected  no SCSI passthrough
//	spec.domain.devices.disks[*].name                              supported must name a volume
//	spec.domain.devices.disks[*].serial                            supported
//	spec.domain.devices.disks[*].shareable                         rejected
//	spec.domain.devices.disks[*].tag                               rejected
//	spec.domain.devices.downwardMetrics                            rejected
//	spec.domain.devices.filesystems                                rejected
//	spec.domain.devices.gpus                                       rejected
//	spec.domain.devices.hostDevices                                rejected
//	spec.domain.devices.inputs                                     rejected
//	spec.domain.devices.interfaces                                 supported
//	spec.domain.devices.interfaces[*].acpiIndex                    rejected
//	spec.domain.devices.interfaces[*].binding                      rejected  no network binding plugins: use masquerade or bridge
//	spec.domain.devices.interfaces[*].bootOrder                    supported
//	spec.domain.devices.interfaces[*].bridge                       supported on a multus network whose NetworkAttachmentDefinition is a CNI bridge, or on the pod network: the VM's tap bridged to the CNI interface in the VMI's network namespace, the address the network's IPAM gave served to the guest by DHCP (as KubeVirt's bridge binding), or with the agent's --pod-bridge or --network-bridge, the node's bridge instead
//	spec.domain.devices.interfaces[*].dhcpOptions                  supported served by the agent's DHCP server on the interfaces it plumbs (masquerade, bridge on CNI networks with IPAM): bootFileName, tftpServerName, ntpServers (IPv4) and privateOptions 224 to 254, refused on a node bridge
//	spec.domain.devices.interfaces[*].macAddress                   supported default: 52:54:00 followed by 3 bytes derived from the VMI UID and the interface name (02:00:00:00:00:00 is the masquerade bridge's)
//	spec.domain.devices.interfaces[*].macvtap                      rejected  use bridge
//	spec.domain.devices.interfaces[*].masquerade                   supported pod network only: NAT behind the pod IP in the VMI's network namespace, the guest gets the VM network's second address (10.0.2.2) by DHCP from the agent, as in KubeVirt (IPv4 only)
//	spec.domain.devices.interfaces[*].model                        supported virtio (default), e1000, e1000e or rtl8139
//	spec.domain.devices.interfaces[*].name                         supported must name a network
//	spec.domain.devices.interfaces[*].passt                        rejected  use masquerade
//	spec.domain.devices.interfaces[*].pciAddress                   rejected
//	spec.domain.devices.interfaces[*].portRanges                   supported masquerade only, at most 10, not overlapping and not with ports: forwarded like ports (KubeVirt's PortRangesSpec feature gate is not needed)
//	spec.domain.devices.interfaces[*].ports                        supported TCP or UDP: the masquerade binding forwards these ports of the pod IP to the guest (every port when none is declared), as in KubeVirt, and with bridge every port reaches the guest anyway
//	spec.domain.devices.interfaces[*].slirp                        rejected  use masquerade
//	spec.domain.devices.interfaces[*].sriov                        rejected  use bridge
//	spec.domain.devices.interfaces[*].state                        rejected
//	spec.domain.devices.interfaces[*].tag                          rejected
//	spec.domain.devices.logSerialConsole                           supported default true when the agent has a log directory: the console is also written to <log dir>/<namespace>_<name>-serial.log
//	spec.domain.devices.networkInterfaceMultiqueue                 rejected
//	spec.domain.devices.panicDevices                               rejected
//	spec.domain.devices.rng                                        supported virtio-rng fed from /dev/urandom
//	spec.domain.devices.sound                                      rejected
//	spec.domain.devices.tpm                                        rejected
//	spec.domain.devices.useVirtioTransitional                      rejected
//	spec.domain.devices.video                                      rejected
//	spec.domain.devices.watchdog                                   rejected
//	spec.domain.features                                           supported
//	spec.domain.features.acpi                                      supported on unless enabled: false (graceful shutdown needs it)
//	spec.domain.features.acpi.enabled                              supported
//	spec.domain.features.apic                                      supported on unless enabled: false
//	spec.domain.features.apic.enabled                              supported
//	spec.domain.features.apic.endOfInterrupt                       rejected
//	spec.domain.features.hyperv                                    rejected
//	spec.domain.features.hypervPassthrough                         rejected
//	spec.domain.features.kvm                                       rejected
//	spec.domain.features.pvspinlock                                rejected
//	spec.domain.features.smm                                       supported System Management Mode (on unless enabled: false), which EFI secure boot needs: secure boot with enabled: false is refused
//	spec.domain.features.smm.enabled                               supported
//	spec.domain.firmware                                           supported
//	spec.domain.firmware.acpi                                      rejected
//	spec.domain.firmware.bootloader                                supported BIOS (SeaBIOS) when unset
//	spec.domain.firmware.bootloader.bios                           supported
//	spec.domain.firmware.bootloader.bios.useSerial                 supported
//	spec.domain.firmware.bootloader.efi                            supported OVMF chosen by libvirt's firmware autoselection
//	spec.domain.firmware.bootloader.efi.persistent                 rejected  no NVRAM persisted across VMIs
//	spec.domain.firmware.bootloader.efi.secureBoot                 supported default true, as in KubeVirt, with SMM turned on
//	spec.domain.firmware.kernelBoot                                supported direct kernel boot from files on the node
//	spec.domain.firmware.kernelBoot.container                      supported
//	spec.domain.firmware.kernelBoot.container.image                supported must be file:///absolute/dir on the node (no image is pulled), holding kernelPath and initrdPath
//	spec.domain.firmware.kernelBoot.container.imagePullPolicy      ignored   no image is pulled
//	spec.domain.firmware.kernelBoot.container.imagePullSecret      ignored   no image is pulled
//	spec.domain.firmware.kernelBoot.container.initrdPath           supported
//	spec.domain.firmware.kernelBoot.container.kernelPath           supported required
//	spec.domain.firmware.kernelBoot.kernelArgs                     supported the kernel command line
//	spec.domain.firmware.serial                                    supported SMBIOS system serial number
//	spec.domain.firmware.uuid                                      supported the domain UUID, default metadata.uid
//	spec.domain.ioThreads                                          rejected
//	spec.domain.ioThreadsPolicy                                    rejected
//	spec.domain.launchSecurity                                     rejected
//	spec.domain.machine                                            supported
//	spec.domain.machine.type                                       supported default q35
//	spec.domain.memory                                             supported
//	spec.domain.memory.guest                                       supported guest memory, default resources.requests.memory
//	spec.domain.memory.hugepages                                   rejected
//	spec.domain.memory.maxGuest                                    rejected  no memory hotplug
//	spec.domain.resources                                          supported
//	spec.domain.resources.limits                                   supported cpu and memory only: cpu (rounded up) is the vCPU count when spec.domain.cpu has no topology, as in KubeVirt, and memory is not enforced
//	spec.domain.resources.overcommitGuestOverhead                  ignored   converge does not reserve QEMU overhead separately
//	spec.domain.resources.requests                                 supported cpu and memory only: used by the scheduler, and memory is the guest memory when memory.guest is unset
//	spec.evictionStrategy                                          ignored   no live migration: a drained node stops its VMs
//	spec.hostname                                                  supported the host name the agent's DHCP server gives the guest (option 12), as KubeVirt gives the pod's, default the VMI's name
//	spec.livenessProbe                                             rejected  converge runs no probes
//	spec.networks                                                  supported
//	spec.networks[*].multus                                        supported a NetworkAttachmentDefinition: a CNI bridge network plumbed by the agent, or a node bridge from the agent's bridge resolver
//	spec.networks[*].multus.default                                supported
//	spec.networks[*].multus.networkName                            supported
//	spec.networks[*].name                                          supported must be used by one interface
//	spec.networks[*].pod                                           supported one per VMI: the cluster's pod network, CNI ADD of the node's CNI configuration (converge-node vm --pod-network-conf-dir) into the VMI's network namespace, as a container runtime does for a pod
//	spec.networks[*].pod.vmIPv6NetworkCIDR                         rejected  the masquerade binding is IPv4 only
//	spec.networks[*].pod.vmNetworkCIDR                             supported masquerade's VM network, IPv4 with at least 4 addresses (default 10.0.2.0/24)
//	spec.nodeSelector                                              supported by the scheduler
//	spec.priorityClassName                                         ignored   no preemption
//	spec.readinessProbe                                            rejected  converge runs no probes: Ready means the domain runs
//	spec.resourceClaims                                            rejected
//	spec.schedulerName                                             ignored   converge schedules every VMI
//	spec.startStrategy                                             rejected
//	spec.subdomain                                                 supported <subdomain>.<the longest service search domain> first in the DHCP search list, as KubeVirt adds it
//	spec.terminationGracePeriodSeconds                             supported by the agent: ACPI shutdown, then destroy after this many seconds (default 30)
//	spec.tolerations                                               supported by the scheduler
//	spec.topologySpreadConstraints                                 rejected  the scheduler has nodeSelector and tolerations only
//	spec.volumes                                                   supported
//	spec.volumes[*].cloudInitConfigDrive                           supported an ISO 9660 volume labelled config-2 made by the node agent as KubeVirt's: openstack/latest/user_data, meta_data.json (instance_id <name>.<namespace>, uuid, hostname) and network_data.json, one cloud-init volume per VMI
//	spec.volumes[*].cloudInitConfigDrive.networkData               supported written as network_data.json
//	spec.volumes[*].cloudInitConfigDrive.networkDataBase64         supported written as network_data.json
//	spec.volumes[*].cloudInitConfigDrive.networkDataSecretRef      supported a Secret in the VMI's namespace, key networkdata or networkData (as KubeVirt)
//	spec.volumes[*].cloudInitConfigDrive.secretRef                 supported a Secret in the VMI's namespace, key userdata or userData (as KubeVirt)
//	spec.volumes[*].cloudInitConfigDrive.userData                  supported
//	spec.volumes[*].cloudInitConfigDrive.userDataBase64            supported
//	spec.volumes[*].cloudInitNoCloud                               supported an ISO 9660 volume labelled cidata made by the node agent as KubeVirt's: user-data, meta-data (instance-id from firmware.uuid or metadata.uid, local-hostname from hostname or the name) and network-config, one cloud-init volume per VMI
//	spec.volumes[*].cloudInitNoCloud.networkData                   supported written as network-config
//	spec.volumes[*].cloudInitNoCloud.networkDataBase64             supported written as network-config
//	spec.volumes[*].cloudInitNoCloud.networkDataSecretRef          supported a Secret in the VMI's namespace, key networkdata or networkData (as KubeVirt)
//	spec.volumes[*].cloudInitNoCloud.secretRef                     supported a Secret in the VMI's namespace, key userdata or userData (as KubeVirt)
//	spec.volumes[*].cloudInitNoCloud.userData                      supported
//	spec.volumes[*].cloudInitNoCloud.userDataBase64                supported
//	spec.volumes[*].configMap                                      supported an ISO 9660 volume made by the node agent as KubeVirt's: one file per key (data and binaryData)
//	spec.volumes[*].configMap.name                                 supported a ConfigMap in the VMI's namespace
//	spec.volumes[*].configMap.optional                             supported true: a missing ConfigMap gives an empty volume
//	spec.volumes[*].configMap.volumeLabel                          supported the ISO's volume label (default cfgdata, as KubeVirt)
//	spec.volumes[*].containerDisk                                  supported pulled by the node agent from its OCI registry (HTTPS, plain HTTP only from loopback), cached on the node by digest, and booted from a qcow2 copy-on-write overlay per VMI that goes with the VMI (the cached image stays pristine)
//	spec.volumes[*].containerDisk.image                            supported an image reference (Docker Hub when no registry is named), linux/amd64 from a multi-platform index: the disk is the single file under /disk/, raw or qcow2
//	spec.volumes[*].containerDisk.imagePullPolicy                  supported Always, IfNotPresent or Never (unset: Always for the tag latest or no tag, else IfNotPresent, as Kubernetes)
//	spec.volumes[*].containerDisk.imagePullSecret                  supported a kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg Secret in the VMI's namespace
//	spec.volumes[*].containerDisk.path                             supported the disk's path in the image instead of the single file under /disk/
//	spec.volumes[*].dataVolume                                     supported the DataVolume's PVC (CDI names it after the DataVolume), as persistentVolumeClaim, and the node agent starts the VMI once the DataVolume has Succeeded
//	spec.volumes[*].dataVolume.hotpluggable                        rejected  converge has no hotplug
//	spec.volumes[*].dataVolume.name                                supported
//	spec.volumes[*].downwardAPI                                    rejected
//	spec.volumes[*].downwardMetrics                                rejected
//	spec.volumes[*].emptyDisk                                      supported a sparse qcow2 image made by the node agent for the VMI and deleted with it (as KubeVirt: its data does not outlive the VMI)
//	spec.volumes[*].emptyDisk.capacity                             supported required, at least 1 byte
//	spec.volumes[*].ephemeral                                      rejected
//	spec.volumes[*].hostDisk                                       supported a raw image (or block device) on the node
//	spec.volumes[*].hostDisk.capacity                              ignored   only used by DiskOrCreate
//	spec.volumes[*].hostDisk.path                                  supported absolute
//	spec.volumes[*].hostDisk.shared                                rejected
//	spec.volumes[*].hostDisk.type                                  supported Disk only (DiskOrCreate is refused: the agent does not create images yet)
//	spec.volumes[*].memoryDump                                     rejected
//	spec.volumes[*].name                                           supported must be used by one disk
//	spec.volumes[*].persistentVolumeClaim                          supported a raw disk.img (Filesystem volume) or a block device: the node agent follows the bound PersistentVolume to the hostpath CSI driver's volume on its node
//	spec.volumes[*].persistentVolumeClaim.claimName                supported
//	spec.volumes[*].persistentVolumeClaim.hotpluggable             rejected  converge has no hotplug
//	spec.volumes[*].persistentVolumeClaim.readOnly                 supported
//	spec.volumes[*].secret                                         supported an ISO 9660 volume made by the node agent as KubeVirt's: one file per key
//	spec.volumes[*].secret.optional                                supported true: a missing Secret gives an empty volume
//	spec.volumes[*].secret.secretName                              supported a Secret in the VMI's namespace
//	spec.volumes[*].secret.volumeLabel                             supported the ISO's volume label (default cfgdata, as KubeVirt)
//	spec.volumes[*].serviceAccount                                 rejected  the node agent issues no ServiceAccount tokens yet: use a secret volume
//	spec.volumes[*].sysprep                                        rejected
//
// END SUPPORT TABLE
package vmisupport
