package domain

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/api/vmisupport"
)

// Build translates a VMI into the libvirt domain that runs it on this node.
// It refuses, rather than approximates: every field the support table
// (vmisupport.CheckSpec) rejects or does not know, and every supported
// field with a value converge cannot honour, is reported, all at once, as
// vmisupport.FieldErrors wrapped as
// "VirtualMachineInstance <namespace>/<name>: <path>: <reason>; …". Build
// reads no files and calls libvirt nowhere; volumes and bridges come from
// the resolvers in opts. When the only refusals are volumes a resolver
// reported not ready yet, the error also wraps ErrVolumeNotReady. The
// result marshals with (*libvirtxml.Domain).Marshal.
func Build(vmi *kubevirtv1.VirtualMachineInstance, opts Options) (*libvirtxml.Domain, error) {
	if vmi == nil {
		return nil, fmt.Errorf("VirtualMachineInstance: nil")
	}
	id := vmi.Namespace + "/" + vmi.Name
	switch opts.DomainType {
	case "qemu", "kvm", "test":
	default:
		return nil, fmt.Errorf("VirtualMachineInstance %s: domain type %q: expected qemu, kvm or test", id, opts.DomainType)
	}
	b := &builder{vmi: vmi, opts: opts, errs: vmisupport.CheckSpec(&vmi.Spec)}
	d := b.build()
	if len(b.errs) > 0 {
		err := fmt.Errorf("VirtualMachineInstance %s: %w", id, b.errs.Sorted())
		if b.notReady == len(b.errs) {
			return nil, notReadyError{err}
		}
		return nil, err
	}
	return d, nil
}

// notReadyError is Build's error when every refused field is a volume
// not ready yet: errors.Is(err, ErrVolumeNotReady) holds, and the
// message and FieldErrors are the wrapped error's.
type notReadyError struct{ error }

func (e notReadyError) Unwrap() []error { return []error{e.error, ErrVolumeNotReady} }

type builder struct {
	vmi  *kubevirtv1.VirtualMachineInstance
	opts Options
	errs vmisupport.FieldErrors
	// notReady counts the errors of errs that are volumes not ready yet
	// (ErrVolumeNotReady).
	notReady int
}

func (b *builder) build() *libvirtxml.Domain {
	vmi, spec := b.vmi, &b.vmi.Spec
	if vmi.Namespace == "" {
		b.errs.Add("metadata.namespace", "required")
	}
	if vmi.Name == "" {
		b.errs.Add("metadata.name", "required")
	}
	if spec.Architecture != "" && spec.Architecture != "amd64" {
		b.errs.Add("spec.architecture", "%q: only amd64 is supported", spec.Architecture)
	}
	d := &libvirtxml.Domain{
		Type:       b.opts.DomainType,
		Name:       Name(vmi.Namespace, vmi.Name),
		UUID:       b.uuid(),
		Memory:     b.memory(),
		VCPU:       nil,
		OS:         b.os(),
		Features:   b.features(),
		CPU:        b.cpu(),
		Clock:      &libvirtxml.DomainClock{Offset: "utc"},
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		OnCrash:    "destroy",
		Devices:    &libvirtxml.DomainDeviceList{Emulator: b.opts.Emulator},
	}
	if vmi.Annotations[v1alpha1.RunStrategyAnnotation] == string(kubevirtv1.RunStrategyOnce) {
		d.OnReboot = "destroy"
	}
	if t := d.CPU.Topology; t != nil {
		d.VCPU = &libvirtxml.DomainVCPU{Placement: "static", Value: uint(t.Sockets * t.Cores * t.Threads)}
	}
	d.Metadata = Metadata{Namespace: vmi.Namespace, Name: vmi.Name, UID: string(vmi.UID)}.marshal()
	if sys := b.sysInfo(d.UUID); len(sys) > 0 {
		d.SysInfo = []libvirtxml.DomainSysInfo{{SMBIOS: &libvirtxml.DomainSysInfoSMBIOS{
			System: &libvirtxml.DomainSysInfoSystem{Entry: sys},
		}}}
		d.OS.SMBios = &libvirtxml.DomainSMBios{Mode: "sysinfo"}
	}
	if b.smm() {
		d.Features.SMM = &libvirtxml.DomainFeatureSMM{State: "on"}
	}
	b.disks(d.Devices)
	b.interfaces(d.Devices)
	b.console(d.Devices)
	b.memBalloon(d.Devices)
	if spec.Domain.Devices.Rng != nil {
		d.Devices.RNGs = []libvirtxml.DomainRNG{{
			Model:   "virtio",
			Backend: &libvirtxml.DomainRNGBackend{Random: &libvirtxml.DomainRNGBackendRandom{Device: "/dev/urandom"}},
		}}
	}
	return d
}

func (b *builder) uuid() string {
	if fw := b.vmi.Spec.Domain.Firmware; fw != nil && fw.UUID != "" {
		return string(fw.UUID)
	}
	if b.vmi.UID == "" {
		b.errs.Add("metadata.uid", "empty: the API server sets it (or set spec.domain.firmware.uuid)")
	}
	return string(b.vmi.UID)
}

func (b *builder) memory() *libvirtxml.DomainMemory {
	dom := &b.vmi.Spec.Domain
	b.checkResourceNames("spec.domain.resources.requests", dom.Resources.Requests)
	b.checkResourceNames("spec.domain.resources.limits", dom.Resources.Limits)
	path, q := "spec.domain.memory.guest", (*resource.Quantity)(nil)
	if dom.Memory != nil && dom.Memory.Guest != nil {
		q = dom.Memory.Guest
	} else if r, ok := dom.Resources.Requests[corev1.ResourceMemory]; ok {
		path, q = "spec.domain.resources.requests.memory", &r
	}
	if q == nil {
		b.errs.Add("spec.domain.memory.guest", "guest memory is required: set memory.guest or resources.requests.memory")
		return nil
	}
	kib := (q.Value() + 1023) / 1024
	if kib <= 0 {
		b.errs.Add(path, "%s: must be positive", q.String())
		return nil
	}
	return &libvirtxml.DomainMemory{Value: uint(kib), Unit: "KiB"}
}

func (b *builder) checkResourceNames(path string, rl corev1.ResourceList) {
	for name := range rl {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			b.errs.Add(fmt.Sprintf("%s[%s]", path, name), "only cpu and memory are supported")
		}
	}
}

func (b *builder) cpu() *libvirtxml.DomainCPU {
	dom := &b.vmi.Spec.Domain
	sockets, cores, threads := 1, 1, 1
	c := dom.CPU
	if c != nil && (c.Sockets > 0 || c.Cores > 0 || c.Threads > 0) {
		sockets, cores, threads = orOne(c.Sockets), orOne(c.Cores), orOne(c.Threads)
	} else if l, ok := dom.Resources.Limits[corev1.ResourceCPU]; ok {
		cores = int((l.MilliValue() + 999) / 1000)
		if cores < 1 {
			cores = 1
		}
	}
	out := &libvirtxml.DomainCPU{Topology: &libvirtxml.DomainCPUTopology{Sockets: sockets, Dies: 1, Cores: cores, Threads: threads}}
	if c == nil || c.Model == "" {
		return out
	}
	switch c.Model {
	case kubevirtv1.CPUModeHostModel, kubevirtv1.CPUModeHostPassthrough:
		if b.opts.DomainType != "kvm" {
			b.errs.Add("spec.domain.cpu.model", "%s needs domain type kvm and this node runs domain type %s: use a named model such as qemu64, or leave it unset", c.Model, b.opts.DomainType)
		}
		out.Mode = c.Model
	default:
		out.Mode, out.Match = "custom", "exact"
		out.Model = &libvirtxml.DomainCPUModel{Value: c.Model, Fallback: "forbid"}
	}
	return out
}

func orOne(n uint32) int {
	if n == 0 {
		return 1
	}
	return int(n)
}

// smm reports whether the guest gets System Management Mode: when
// spec.domain.features.smm is set and not disabled, or when EFI secure boot
// needs it. Secure boot with smm.enabled: false is refused, as KubeVirt's
// admitter refuses it (pkg/virt-api/webhooks/validating-webhook/admitters
// vmi-create-admitter.go: "SMM must be enabled when secure boot is
// enabled"); the common preferences (fedora, rhel.9, …) set smm: {}
// beside secure boot.
func (b *builder) smm() bool {
	var want, off bool
	if f := b.vmi.Spec.Domain.Features; f != nil && f.SMM != nil {
		want = f.SMM.Enabled == nil || *f.SMM.Enabled
		off = !want
	}
	if b.secureBoot() {
		if off {
			b.errs.Add("spec.domain.features.smm.enabled", "false: EFI secure boot (spec.domain.firmware.bootloader.efi.secureBoot, default true) needs SMM")
		}
		return true
	}
	return want
}

func (b *builder) secureBoot() bool {
	fw := b.vmi.Spec.Domain.Firmware
	if fw == nil || fw.Bootloader == nil || fw.Bootloader.EFI == nil {
		return false
	}
	return fw.Bootloader.EFI.SecureBoot == nil || *fw.Bootloader.EFI.SecureBoot
}

func (b *builder) os() *libvirtxml.DomainOS {
	dom := &b.vmi.Spec.Domain
	machine := b.opts.MachineType
	if dom.Machine != nil && dom.Machine.Type != "" {
		machine = dom.Machine.Type
	}
	os := &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Arch: "x86_64", Machine: machine, Type: "hvm"}}
	fw := dom.Firmware
	if fw == nil {
		return os
	}
	if bl := fw.Bootloader; bl != nil {
		switch {
		case bl.BIOS != nil && bl.EFI != nil:
			b.errs.Add("spec.domain.firmware.bootloader", "set bios or efi, not both")
		case bl.BIOS != nil:
			if bl.BIOS.UseSerial != nil && *bl.BIOS.UseSerial {
				os.BIOS = &libvirtxml.DomainBIOS{UseSerial: "yes"}
			}
		case bl.EFI != nil:
			secure := yesNo(b.secureBoot())
			os.Firmware = "efi"
			os.FirmwareInfo = &libvirtxml.DomainOSFirmwareInfo{Features: []libvirtxml.DomainOSFirmwareFeature{
				{Name: "enrolled-keys", Enabled: secure},
				{Name: "secure-boot", Enabled: secure},
			}}
			if b.secureBoot() {
				os.Loader = &libvirtxml.DomainLoader{Secure: "yes"}
			}
		}
	}
	if kb := fw.KernelBoot; kb != nil {
		const p = "spec.domain.firmware.kernelBoot"
		if kb.Container == nil {
			if kb.KernelArgs != "" {
				b.errs.Add(p+".kernelArgs", "needs kernelBoot.container (as in KubeVirt)")
			}
			return os
		}
		dir, ok := b.kernelDir(kb.Container.Image)
		if !ok {
			return os
		}
		if kb.Container.KernelPath == "" {
			b.errs.Add(p+".container.kernelPath", "required: the kernel's path inside %s", kb.Container.Image)
		} else {
			os.Kernel = b.inside(p+".container.kernelPath", dir, kb.Container.KernelPath)
		}
		if kb.Container.InitrdPath != "" {
			os.Initrd = b.inside(p+".container.initrdPath", dir, kb.Container.InitrdPath)
		}
		os.Cmdline = kb.KernelArgs
	}
	return os
}

// kernelDir parses a kernel boot image, which converge takes as a
// directory on the node written as a file:///absolute/dir URL.
func (b *builder) kernelDir(image string) (string, bool) {
	const p = "spec.domain.firmware.kernelBoot.container.image"
	u, err := url.Parse(image)
	if err != nil || u.Scheme != "file" {
		b.errs.Add(p, "%q: pulling kernel images is not supported by converge: use file:///absolute/dir/on/the/node", image)
		return "", false
	}
	if u.Host != "" || !filepath.IsAbs(u.Path) {
		b.errs.Add(p, "%q: expected file:///absolute/dir (no host part)", image)
		return "", false
	}
	return filepath.Clean(u.Path), true
}

// inside joins rel to dir and refuses a result outside dir.
func (b *builder) inside(path, dir, rel string) string {
	full := filepath.Join(dir, rel)
	if full != dir && !strings.HasPrefix(full, dir+string(filepath.Separator)) {
		b.errs.Add(path, "%q leaves the image directory %s", rel, dir)
	}
	return full
}

func (b *builder) features() *libvirtxml.DomainFeatureList {
	f := &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}, APIC: &libvirtxml.DomainFeatureAPIC{}}
	if spec := b.vmi.Spec.Domain.Features; spec != nil {
		if spec.ACPI.Enabled != nil && !*spec.ACPI.Enabled {
			f.ACPI = nil
		}
		if spec.APIC != nil && spec.APIC.Enabled != nil && !*spec.APIC.Enabled {
			f.APIC = nil
		}
	}
	return f
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}
