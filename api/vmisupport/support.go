package vmisupport

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Support says what converge does with a VMI field.
type Support string

const (
	// Supported fields are honoured, by the domain translation or, where
	// the note says so, by the scheduler or the agent.
	Supported Support = "supported"
	// Ignored fields are accepted and have no effect on a converge node;
	// the note says why that does not change how the guest runs.
	Ignored Support = "ignored"
	// Rejected fields are refused with the field's path, by the VM
	// validation webhook (operators/virt/vmadmission) at admission and by
	// the domain translation (nodeplane/vm/domain.Build) on the node: the
	// VMI is refused rather than run differently from what it asks for.
	Rejected Support = "rejected"
)

// Field is one row of the support table: Path is a JSON path under the
// VMI where "[*]" stands for any list index, Support what converge does
// with it, and Note the restrictions or the reason.
type Field struct {
	Path    string
	Support Support
	Note    string
}

// SupportTable returns the support table, in path order: every VMI spec
// field converge knows about. A field that is set and is neither in the table
// nor below an Ignored or leaf field is refused like a Rejected one, with the
// reason "not supported by converge". Leaf fields (no rows below them, such
// as spec.nodeSelector) are taken whole.
func SupportTable() []Field {
	out := append([]Field(nil), supportTable...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

const (
	sup = Supported
	ign = Ignored
	rej = Rejected
)

// supportTable is every row, from the tables of each area (spec order
// within each); SupportTable sorts it.
var supportTable = concat(specRows, diskRows, networkRows)

func concat(tables ...[]Field) []Field {
	var out []Field
	for _, t := range tables {
		out = append(out, t...)
	}
	return out
}

// specRows are the rows of the VMI spec outside disks, volumes,
// interfaces and networks.
var specRows = []Field{
	{"spec", sup, ""},
	{"spec.domain", sup, ""},
	{"spec.domain.resources", sup, ""},
	{"spec.domain.resources.requests", sup, "cpu and memory only: used by the scheduler, and memory is the guest memory when memory.guest is unset"},
	{"spec.domain.resources.limits", sup, "cpu and memory only: cpu (rounded up) is the vCPU count when spec.domain.cpu has no topology, as in KubeVirt, and memory is not enforced"},
	{"spec.domain.resources.overcommitGuestOverhead", ign, "converge does not reserve QEMU overhead separately"},
	{"spec.domain.cpu", sup, ""},
	{"spec.domain.cpu.sockets", sup, "default 1"},
	{"spec.domain.cpu.cores", sup, "default 1"},
	{"spec.domain.cpu.threads", sup, "default 1"},
	{"spec.domain.cpu.model", sup, "a named QEMU CPU model (mode=custom, fallback=forbid): host-model and host-passthrough are refused with domain type qemu (TCG), and unset means the hypervisor's default model"},
	{"spec.domain.cpu.maxSockets", rej, "no CPU hotplug"},
	{"spec.domain.cpu.features", rej, ""},
	{"spec.domain.cpu.dedicatedCpuPlacement", rej, "no CPU pinning"},
	{"spec.domain.cpu.numa", rej, ""},
	{"spec.domain.cpu.isolateEmulatorThread", rej, ""},
	{"spec.domain.cpu.realtime", rej, ""},
	{"spec.domain.memory", sup, ""},
	{"spec.domain.memory.guest", sup, "guest memory, default resources.requests.memory"},
	{"spec.domain.memory.maxGuest", rej, "no memory hotplug"},
	{"spec.domain.memory.hugepages", rej, ""},
	{"spec.domain.machine", sup, ""},
	{"spec.domain.machine.type", sup, "default q35"},
	{"spec.domain.firmware", sup, ""},
	{"spec.domain.firmware.uuid", sup, "the domain UUID, default metadata.uid"},
	{"spec.domain.firmware.serial", sup, "SMBIOS system serial number"},
	{"spec.domain.firmware.bootloader", sup, "BIOS (SeaBIOS) when unset"},
	{"spec.domain.firmware.bootloader.bios", sup, ""},
	{"spec.domain.firmware.bootloader.bios.useSerial", sup, ""},
	{"spec.domain.firmware.bootloader.efi", sup, "OVMF chosen by libvirt's firmware autoselection"},
	{"spec.domain.firmware.bootloader.efi.secureBoot", sup, "default true, as in KubeVirt, with SMM turned on"},
	{"spec.domain.firmware.bootloader.efi.persistent", rej, "no NVRAM persisted across VMIs"},
	{"spec.domain.firmware.kernelBoot", sup, "direct kernel boot from files on the node"},
	{"spec.domain.firmware.kernelBoot.kernelArgs", sup, "the kernel command line"},
	{"spec.domain.firmware.kernelBoot.container", sup, ""},
	{"spec.domain.firmware.kernelBoot.container.image", sup, "must be file:///absolute/dir on the node (no image is pulled), holding kernelPath and initrdPath"},
	{"spec.domain.firmware.kernelBoot.container.kernelPath", sup, "required"},
	{"spec.domain.firmware.kernelBoot.container.initrdPath", sup, ""},
	{"spec.domain.firmware.kernelBoot.container.imagePullPolicy", ign, "no image is pulled"},
	{"spec.domain.firmware.kernelBoot.container.imagePullSecret", ign, "no image is pulled"},
	{"spec.domain.firmware.acpi", rej, ""},
	{"spec.domain.clock", rej, "the guest clock is UTC"},
	{"spec.domain.features", sup, ""},
	{"spec.domain.features.acpi", sup, "on unless enabled: false (graceful shutdown needs it)"},
	{"spec.domain.features.acpi.enabled", sup, ""},
	{"spec.domain.features.apic", sup, "on unless enabled: false"},
	{"spec.domain.features.apic.enabled", sup, ""},
	{"spec.domain.features.apic.endOfInterrupt", rej, ""},
	{"spec.domain.features.smm", sup, "System Management Mode (on unless enabled: false), which EFI secure boot needs: secure boot with enabled: false is refused"},
	{"spec.domain.features.smm.enabled", sup, ""},
	{"spec.domain.features.hyperv", rej, ""},
	{"spec.domain.features.hypervPassthrough", rej, ""},
	{"spec.domain.features.kvm", rej, ""},
	{"spec.domain.features.pvspinlock", rej, ""},
	{"spec.domain.devices", sup, ""},
	{"spec.domain.devices.autoattachGraphicsDevice", ign, "converge domains are headless: use the serial console"},
	{"spec.domain.devices.autoattachInputDevice", ign, "converge domains are headless"},
	{"spec.domain.devices.autoattachSerialConsole", sup, "default true: a pty serial console on ttyS0"},
	{"spec.domain.devices.logSerialConsole", sup, "default true when the agent has a log directory: the console is also written to <log dir>/<namespace>_<name>-serial.log"},
	{"spec.domain.devices.autoattachMemBalloon", sup, "default true: a virtio balloon"},
	{"spec.domain.devices.autoattachVSOCK", rej, ""},
	{"spec.domain.devices.disableHotplug", ign, "converge has no hotplug"},
	{"spec.domain.devices.rng", sup, "virtio-rng fed from /dev/urandom"},
	{"spec.domain.devices.useVirtioTransitional", rej, ""},
	{"spec.domain.devices.watchdog", rej, ""},
	{"spec.domain.devices.inputs", rej, ""},
	{"spec.domain.devices.blockMultiQueue", rej, ""},
	{"spec.domain.devices.networkInterfaceMultiqueue", rej, ""},
	{"spec.domain.devices.gpus", rej, ""},
	{"spec.domain.devices.downwardMetrics", rej, ""},
	{"spec.domain.devices.panicDevices", rej, ""},
	{"spec.domain.devices.filesystems", rej, ""},
	{"spec.domain.devices.hostDevices", rej, ""},
	{"spec.domain.devices.clientPassthrough", rej, ""},
	{"spec.domain.devices.sound", rej, ""},
	{"spec.domain.devices.tpm", rej, ""},
	{"spec.domain.devices.video", rej, ""},
	{"spec.domain.ioThreadsPolicy", rej, ""},
	{"spec.domain.ioThreads", rej, ""},
	{"spec.domain.chassis", rej, ""},
	{"spec.domain.launchSecurity", rej, ""},
	{"spec.nodeSelector", sup, "by the scheduler"},
	{"spec.tolerations", sup, "by the scheduler"},
	{"spec.affinity", rej, "the scheduler has nodeSelector and tolerations only"},
	{"spec.topologySpreadConstraints", rej, "the scheduler has nodeSelector and tolerations only"},
	{"spec.schedulerName", ign, "converge schedules every VMI"},
	{"spec.priorityClassName", ign, "no preemption"},
	{"spec.evictionStrategy", ign, "no live migration: a drained node stops its VMs"},
	{"spec.startStrategy", rej, ""},
	{"spec.terminationGracePeriodSeconds", sup, "by the agent: ACPI shutdown, then destroy after this many seconds (default 30)"},
	{"spec.livenessProbe", rej, "converge runs no probes"},
	{"spec.readinessProbe", rej, "converge runs no probes: Ready means the domain runs"},
	{"spec.accessCredentials", rej, "no guest agent"},
	{"spec.architecture", sup, "amd64 only"},
	{"spec.resourceClaims", rej, ""},
}

var supportIndex = func() map[string]Field {
	m := make(map[string]Field, len(supportTable))
	for _, f := range supportTable {
		if _, dup := m[f.Path]; dup {
			panic("vmisupport: duplicate support table row " + f.Path)
		}
		m[f.Path] = f
	}
	return m
}()

// parents are the patterns the table has rows below: every prefix of a
// row's path that a "." or a "[*]" follows. CheckSpec asks for each field
// set; a scan of the table per field was most of its time.
var parents = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range supportTable {
		for i := range len(f.Path) {
			if f.Path[i] == '.' || strings.HasPrefix(f.Path[i:], "[*]") {
				m[f.Path[:i]] = true
			}
		}
	}
	return m
}()

// hasChildren reports whether the table has rows below pattern (a row
// whose path starts with pattern+"." or pattern+"[*]").
func hasChildren(pattern string) bool { return parents[pattern] }

// CheckSpec walks every field set in spec (as its JSON encoding has it)
// and returns a FieldError for each one the support table rejects or does
// not know, sorted by path; nil when every field is supported or ignored.
// It checks field presence only: the domain translation
// (nodeplane/vm/domain.Build) also checks values.
func CheckSpec(spec *kubevirtv1.VirtualMachineInstanceSpec) FieldErrors {
	raw, err := json.Marshal(spec)
	if err != nil {
		return FieldErrors{{Path: "spec", Reason: fmt.Sprintf("cannot encode: %v", err)}}
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return FieldErrors{{Path: "spec", Reason: fmt.Sprintf("cannot decode: %v", err)}}
	}
	var errs FieldErrors
	walk(&errs, "spec", "spec", tree)
	return errs.Sorted()
}

// walk checks the children of the value at path (pattern is path with list
// indexes replaced by [*]).
func walk(errs *FieldErrors, path, pattern string, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child, childPattern := path+"."+k, pattern+"."+k
			f, known := supportIndex[childPattern]
			switch {
			case !known:
				errs.Add(child, "not supported by converge")
			case f.Support == Rejected:
				reason := "not supported by converge"
				if f.Note != "" {
					reason += " (" + f.Note + ")"
				}
				errs.Add(child, "%s", reason)
			case f.Support == Ignored || !hasChildren(childPattern):
				// taken whole
			default:
				walk(errs, child, childPattern, v[k])
			}
		}
	case []any:
		for i, item := range v {
			walk(errs, fmt.Sprintf("%s[%d]", path, i), pattern+"[*]", item)
		}
	}
}
