package instancetype_test

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"

	"github.com/converge-dev/converge/operators/virt/instancetype"
)

// TestApplyPreference: a preference fills in only what the VM leaves
// unset. Cases from KubeVirt's pkg/instancetype/preference/apply tests
// (device, disk, interface, firmware, features, machine, clock,
// subdomain, termination, architecture, annotations, launch security).
func TestApplyPreference(t *testing.T) {
	type spec = kubevirtv1.VirtualMachineInstanceSpec
	disks := func(ds ...kubevirtv1.Disk) spec {
		return spec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Disks: ds}}}
	}
	disk := func(name string, bus kubevirtv1.DiskBus) kubevirtv1.Disk {
		return kubevirtv1.Disk{Name: name, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: bus}}}
	}
	podNet := []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}},
		{Name: "br", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "br"}}}}
	ifaces := func(is ...kubevirtv1.Interface) spec {
		return spec{Networks: podNet, Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Interfaces: is}}}
	}
	efi := func(secure *bool) *kubevirtv1.Firmware {
		return &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: secure}}}
	}
	masq := kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}
	bridge := kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}
	for _, tc := range []struct {
		name     string
		pref     v1beta1.VirtualMachinePreferenceSpec
		vm, want spec
	}{
		{"disk bus: unset gets the preferred, set kept, no target becomes a disk",
			v1beta1.VirtualMachinePreferenceSpec{Devices: &v1beta1.DevicePreferences{PreferredDiskBus: kubevirtv1.DiskBusVirtio,
				PreferredCdromBus: kubevirtv1.DiskBusSATA, PreferredLunBus: kubevirtv1.DiskBusSCSI}},
			disks(disk("a", ""), disk("b", kubevirtv1.DiskBusSATA), kubevirtv1.Disk{Name: "c"},
				kubevirtv1.Disk{Name: "d", DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{}}},
				kubevirtv1.Disk{Name: "e", DiskDevice: kubevirtv1.DiskDevice{LUN: &kubevirtv1.LunTarget{}}}),
			disks(disk("a", kubevirtv1.DiskBusVirtio), disk("b", kubevirtv1.DiskBusSATA), disk("c", kubevirtv1.DiskBusVirtio),
				kubevirtv1.Disk{Name: "d", DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusSATA}}},
				kubevirtv1.Disk{Name: "e", DiskDevice: kubevirtv1.DiskDevice{LUN: &kubevirtv1.LunTarget{Bus: kubevirtv1.DiskBusSCSI}}})},
		{"disk cache, io, block size; dedicated I/O thread on virtio disks only",
			v1beta1.VirtualMachinePreferenceSpec{Devices: &v1beta1.DevicePreferences{PreferredDiskCache: kubevirtv1.CacheNone,
				PreferredDiskIO: kubevirtv1.IONative, PreferredDiskDedicatedIoThread: ptr(true),
				PreferredDiskBlockSize: &kubevirtv1.BlockSize{MatchVolume: &kubevirtv1.FeatureState{}}}},
			disks(disk("a", kubevirtv1.DiskBusVirtio), disk("b", kubevirtv1.DiskBusSATA),
				kubevirtv1.Disk{Name: "c", Cache: kubevirtv1.CacheWriteThrough, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}),
			disks(kubevirtv1.Disk{Name: "a", Cache: kubevirtv1.CacheNone, IO: kubevirtv1.IONative, DedicatedIOThread: ptr(true),
				BlockSize: &kubevirtv1.BlockSize{MatchVolume: &kubevirtv1.FeatureState{}}, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
				kubevirtv1.Disk{Name: "b", Cache: kubevirtv1.CacheNone, IO: kubevirtv1.IONative,
					BlockSize: &kubevirtv1.BlockSize{MatchVolume: &kubevirtv1.FeatureState{}}, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSATA}}},
				kubevirtv1.Disk{Name: "c", Cache: kubevirtv1.CacheWriteThrough, IO: kubevirtv1.IONative, DedicatedIOThread: ptr(true),
					BlockSize: &kubevirtv1.BlockSize{MatchVolume: &kubevirtv1.FeatureState{}}, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}})},
		{"interface model: unset gets the preferred, set kept; masquerade only on the pod network without a binding",
			v1beta1.VirtualMachinePreferenceSpec{Devices: &v1beta1.DevicePreferences{PreferredInterfaceModel: "virtio",
				PreferredInterfaceMasquerade: &kubevirtv1.InterfaceMasquerade{}}},
			ifaces(kubevirtv1.Interface{Name: "default"}, kubevirtv1.Interface{Name: "br", Model: "e1000", InterfaceBindingMethod: bridge}),
			ifaces(kubevirtv1.Interface{Name: "default", Model: "virtio", InterfaceBindingMethod: masq},
				kubevirtv1.Interface{Name: "br", Model: "e1000", InterfaceBindingMethod: bridge})},
		{"pod interface with a binding keeps it",
			v1beta1.VirtualMachinePreferenceSpec{Devices: &v1beta1.DevicePreferences{PreferredInterfaceMasquerade: &kubevirtv1.InterfaceMasquerade{}}},
			ifaces(kubevirtv1.Interface{Name: "default", InterfaceBindingMethod: bridge}),
			ifaces(kubevirtv1.Interface{Name: "default", InterfaceBindingMethod: bridge})},
		{"rng, tpm, video, autoattach, multiqueue: unset only",
			v1beta1.VirtualMachinePreferenceSpec{Devices: &v1beta1.DevicePreferences{PreferredRng: &kubevirtv1.Rng{},
				PreferredTPM: &kubevirtv1.TPMDevice{Persistent: ptr(true)}, PreferredVideoType: ptr("virtio"),
				PreferredAutoattachSerialConsole: ptr(true), PreferredAutoattachMemBalloon: ptr(false),
				PreferredNetworkInterfaceMultiQueue: ptr(true), PreferredBlockMultiQueue: ptr(true)}},
			spec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{AutoattachSerialConsole: ptr(false), BlockMultiQueue: ptr(false)}}},
			spec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Rng: &kubevirtv1.Rng{}, TPM: &kubevirtv1.TPMDevice{Persistent: ptr(true)},
				Video: &kubevirtv1.VideoDevice{Type: "virtio"}, AutoattachSerialConsole: ptr(false), AutoattachMemBalloon: ptr(false),
				NetworkInterfaceMultiQueue: ptr(true), BlockMultiQueue: ptr(false)}}}},
		{"panic device added when none",
			v1beta1.VirtualMachinePreferenceSpec{Devices: &v1beta1.DevicePreferences{PreferredPanicDeviceModel: ptr(kubevirtv1.Hyperv)}},
			spec{},
			spec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{PanicDevices: []kubevirtv1.PanicDevice{{Model: ptr(kubevirtv1.Hyperv)}}}}}},
		{"input bus and type of existing inputs",
			v1beta1.VirtualMachinePreferenceSpec{Devices: &v1beta1.DevicePreferences{PreferredInputBus: kubevirtv1.InputBusVirtio, PreferredInputType: kubevirtv1.InputTypeTablet}},
			spec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Inputs: []kubevirtv1.Input{{Name: "a"}, {Name: "b", Bus: kubevirtv1.InputBusUSB}}}}},
			spec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Inputs: []kubevirtv1.Input{
				{Name: "a", Bus: kubevirtv1.InputBusVirtio, Type: kubevirtv1.InputTypeTablet}, {Name: "b", Bus: kubevirtv1.InputBusUSB, Type: kubevirtv1.InputTypeTablet}}}}}},
		{"machine type: unset gets the preferred",
			v1beta1.VirtualMachinePreferenceSpec{Machine: &v1beta1.MachinePreferences{PreferredMachineType: "q35-rhel-8.0"}},
			spec{}, spec{Domain: kubevirtv1.DomainSpec{Machine: &kubevirtv1.Machine{Type: "q35-rhel-8.0"}}}},
		{"machine type: set kept",
			v1beta1.VirtualMachinePreferenceSpec{Machine: &v1beta1.MachinePreferences{PreferredMachineType: "q35-rhel-8.0"}},
			spec{Domain: kubevirtv1.DomainSpec{Machine: &kubevirtv1.Machine{Type: "pc"}}}, spec{Domain: kubevirtv1.DomainSpec{Machine: &kubevirtv1.Machine{Type: "pc"}}}},
		{"firmware: preferred EFI with secure boot",
			v1beta1.VirtualMachinePreferenceSpec{Firmware: &v1beta1.FirmwarePreferences{PreferredEfi: &kubevirtv1.EFI{SecureBoot: ptr(true)}}},
			spec{}, spec{Domain: kubevirtv1.DomainSpec{Firmware: efi(ptr(true))}}},
		{"firmware: a VM on BIOS keeps it",
			v1beta1.VirtualMachinePreferenceSpec{Firmware: &v1beta1.FirmwarePreferences{PreferredEfi: &kubevirtv1.EFI{SecureBoot: ptr(true)}}},
			spec{Domain: kubevirtv1.DomainSpec{Firmware: &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{BIOS: &kubevirtv1.BIOS{}}}}},
			spec{Domain: kubevirtv1.DomainSpec{Firmware: &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{BIOS: &kubevirtv1.BIOS{}}}}}},
		{"firmware: deprecated preferredUseEfi and preferredUseSecureBoot",
			v1beta1.VirtualMachinePreferenceSpec{Firmware: &v1beta1.FirmwarePreferences{DeprecatedPreferredUseEfi: ptr(true), DeprecatedPreferredUseSecureBoot: ptr(false)}},
			spec{}, spec{Domain: kubevirtv1.DomainSpec{Firmware: efi(ptr(false))}}},
		{"firmware: preferred BIOS with serial",
			v1beta1.VirtualMachinePreferenceSpec{Firmware: &v1beta1.FirmwarePreferences{PreferredUseBios: ptr(true), PreferredUseBiosSerial: ptr(true)}},
			spec{}, spec{Domain: kubevirtv1.DomainSpec{Firmware: &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{BIOS: &kubevirtv1.BIOS{UseSerial: ptr(true)}}}}}},
		{"features: smm and apic unset only, acpi always (KubeVirt cannot tell it unset)",
			v1beta1.VirtualMachinePreferenceSpec{Features: &v1beta1.FeaturePreferences{PreferredSmm: &kubevirtv1.FeatureState{},
				PreferredApic: &kubevirtv1.FeatureAPIC{FeatureState: kubevirtv1.FeatureState{Enabled: ptr(true)}}, PreferredAcpi: &kubevirtv1.FeatureState{Enabled: ptr(true)}}},
			spec{Domain: kubevirtv1.DomainSpec{Features: &kubevirtv1.Features{APIC: &kubevirtv1.FeatureAPIC{FeatureState: kubevirtv1.FeatureState{Enabled: ptr(false)}}, ACPI: kubevirtv1.FeatureState{Enabled: ptr(false)}}}},
			spec{Domain: kubevirtv1.DomainSpec{Features: &kubevirtv1.Features{APIC: &kubevirtv1.FeatureAPIC{FeatureState: kubevirtv1.FeatureState{Enabled: ptr(false)}},
				ACPI: kubevirtv1.FeatureState{Enabled: ptr(true)}, SMM: &kubevirtv1.FeatureState{}}}}},
		{"hyperv enlightenments unset only",
			v1beta1.VirtualMachinePreferenceSpec{Features: &v1beta1.FeaturePreferences{PreferredHyperv: &kubevirtv1.FeatureHyperv{
				Relaxed: &kubevirtv1.FeatureState{}, Spinlocks: &kubevirtv1.FeatureSpinlocks{Retries: ptr(uint32(8191))}}}},
			spec{Domain: kubevirtv1.DomainSpec{Features: &kubevirtv1.Features{Hyperv: &kubevirtv1.FeatureHyperv{Relaxed: &kubevirtv1.FeatureState{Enabled: ptr(false)}}}}},
			spec{Domain: kubevirtv1.DomainSpec{Features: &kubevirtv1.Features{Hyperv: &kubevirtv1.FeatureHyperv{Relaxed: &kubevirtv1.FeatureState{Enabled: ptr(false)},
				Spinlocks: &kubevirtv1.FeatureSpinlocks{Retries: ptr(uint32(8191))}}}}}},
		{"clock: offset and timer when unset",
			v1beta1.VirtualMachinePreferenceSpec{Clock: &v1beta1.ClockPreferences{PreferredClockOffset: &kubevirtv1.ClockOffset{UTC: &kubevirtv1.ClockOffsetUTC{OffsetSeconds: ptr(30)}},
				PreferredTimer: &kubevirtv1.Timer{Hyperv: &kubevirtv1.HypervTimer{}}}},
			spec{}, spec{Domain: kubevirtv1.DomainSpec{Clock: &kubevirtv1.Clock{ClockOffset: kubevirtv1.ClockOffset{UTC: &kubevirtv1.ClockOffsetUTC{OffsetSeconds: ptr(30)}},
				Timer: &kubevirtv1.Timer{Hyperv: &kubevirtv1.HypervTimer{}}}}}},
		{"clock: a VM timezone is kept",
			v1beta1.VirtualMachinePreferenceSpec{Clock: &v1beta1.ClockPreferences{PreferredClockOffset: &kubevirtv1.ClockOffset{UTC: &kubevirtv1.ClockOffsetUTC{}}}},
			spec{Domain: kubevirtv1.DomainSpec{Clock: &kubevirtv1.Clock{ClockOffset: kubevirtv1.ClockOffset{Timezone: ptr(kubevirtv1.ClockOffsetTimezone("Europe/Paris"))}}}},
			spec{Domain: kubevirtv1.DomainSpec{Clock: &kubevirtv1.Clock{ClockOffset: kubevirtv1.ClockOffset{Timezone: ptr(kubevirtv1.ClockOffsetTimezone("Europe/Paris"))}}}}},
		{"subdomain, termination grace period, architecture: unset only",
			v1beta1.VirtualMachinePreferenceSpec{PreferredSubdomain: ptr("kubevirt.io"), PreferredTerminationGracePeriodSeconds: ptr(int64(180)),
				PreferredArchitecture: ptr("arm64")},
			spec{Subdomain: "foo.com", Architecture: "amd64"},
			spec{Subdomain: "foo.com", Architecture: "amd64", TerminationGracePeriodSeconds: ptr(int64(180))}},
		{"cpu features: the preferred ones the VM does not name",
			v1beta1.VirtualMachinePreferenceSpec{CPU: &v1beta1.CPUPreferences{PreferredCPUFeatures: []kubevirtv1.CPUFeature{{Name: "a", Policy: "require"}, {Name: "b", Policy: "require"}}}},
			spec{Domain: kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Features: []kubevirtv1.CPUFeature{{Name: "a", Policy: "disable"}}}}},
			spec{Domain: kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Features: []kubevirtv1.CPUFeature{{Name: "a", Policy: "disable"}, {Name: "b", Policy: "require"}}}}}},
		{"launch security: the VM's kept",
			v1beta1.VirtualMachinePreferenceSpec{PreferredLaunchSecurity: &kubevirtv1.LaunchSecurity{SEV: &kubevirtv1.SEV{Policy: &kubevirtv1.SEVPolicy{}}}},
			spec{Domain: kubevirtv1.DomainSpec{LaunchSecurity: &kubevirtv1.LaunchSecurity{SEV: &kubevirtv1.SEV{}}}},
			spec{Domain: kubevirtv1.DomainSpec{LaunchSecurity: &kubevirtv1.LaunchSecurity{SEV: &kubevirtv1.SEV{}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.vm.DeepCopy()
			meta := &metav1.ObjectMeta{}
			if cs := instancetype.ApplyToVMI(templatePath, nil, &tc.pref, got, meta); len(cs) > 0 {
				t.Fatalf("conflicts: %v", cs)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("VMI spec:\n%+v\nwant\n%+v", *got, tc.want)
			}
		})
	}
}

// TestPreferenceAnnotations: the preference's annotations do not override
// the VM's; the instancetype's annotations are applied before them.
func TestPreferenceAnnotations(t *testing.T) {
	it := &v1beta1.VirtualMachineInstancetypeSpec{CPU: v1beta1.CPUInstancetype{Guest: 1}, Memory: v1beta1.MemoryInstancetype{Guest: resource.MustParse("1Gi")},
		Annotations: map[string]string{"shared": "instancetype", "it": "1"}}
	pref := &v1beta1.VirtualMachinePreferenceSpec{Annotations: map[string]string{"shared": "preference", "vm": "preference", "pref": "1"}}
	meta := &metav1.ObjectMeta{Annotations: map[string]string{"vm": "vm"}}
	if cs := instancetype.ApplyToVMI(templatePath, it, pref, &kubevirtv1.VirtualMachineInstanceSpec{}, meta); len(cs) > 0 {
		t.Fatal(cs)
	}
	want := map[string]string{"shared": "instancetype", "it": "1", "vm": "vm", "pref": "1"}
	if !reflect.DeepEqual(meta.Annotations, want) {
		t.Errorf("annotations %v, want %v", meta.Annotations, want)
	}
}

// TestAddDefaultPodInterface: KubeVirt's default NIC is written into a
// VMI without interfaces and networks when its preference models or
// binds interfaces, so that the preference reaches it as in KubeVirt
// (whose VM controller adds the default before the preference); not when
// the VMI declares any, opts out, or the preference says nothing of
// interfaces.
func TestAddDefaultPodInterface(t *testing.T) {
	e1000 := &v1beta1.VirtualMachinePreferenceSpec{Devices: &v1beta1.DevicePreferences{PreferredInterfaceModel: "e1000"}}
	for _, tc := range []struct {
		name string
		pref *v1beta1.VirtualMachinePreferenceSpec
		spec kubevirtv1.VirtualMachineInstanceSpec
		want bool
	}{
		{"no NIC, preferred model", e1000, kubevirtv1.VirtualMachineInstanceSpec{}, true},
		{"no NIC, preferred masquerade", &v1beta1.VirtualMachinePreferenceSpec{Devices: &v1beta1.DevicePreferences{
			PreferredInterfaceMasquerade: &kubevirtv1.InterfaceMasquerade{}}}, kubevirtv1.VirtualMachineInstanceSpec{}, true},
		{"no NIC, preference without interface preferences", &v1beta1.VirtualMachinePreferenceSpec{Devices: &v1beta1.DevicePreferences{
			PreferredDiskBus: kubevirtv1.DiskBusSATA}}, kubevirtv1.VirtualMachineInstanceSpec{}, false},
		{"no preference", nil, kubevirtv1.VirtualMachineInstanceSpec{}, false},
		{"a declared network", e1000, kubevirtv1.VirtualMachineInstanceSpec{Networks: []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()}}, false},
		{"autoattachPodInterface false", e1000, kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
			Devices: kubevirtv1.Devices{AutoattachPodInterface: ptr(false)}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec.DeepCopy()
			if got := instancetype.AddDefaultPodInterface(tc.pref, spec); got != tc.want {
				t.Fatalf("added %v, want %v", got, tc.want)
			}
			if !tc.want {
				if !reflect.DeepEqual(*spec, tc.spec) {
					t.Errorf("spec changed: %+v", spec)
				}
				return
			}
			if cs := instancetype.ApplyToVMI(templatePath, nil, tc.pref, spec, &metav1.ObjectMeta{}); len(cs) > 0 {
				t.Fatal(cs)
			}
			i, n := spec.Domain.Devices.Interfaces, spec.Networks
			if len(i) != 1 || i[0].Name != "default" || i[0].Masquerade == nil || len(n) != 1 || n[0].Name != "default" || n[0].Pod == nil {
				t.Fatalf("interfaces %+v networks %+v, want KubeVirt's default masquerade NIC on the pod network", i, n)
			}
			if tc.pref.Devices.PreferredInterfaceModel != "" && i[0].Model != tc.pref.Devices.PreferredInterfaceModel {
				t.Errorf("model %q, want the preference's %q", i[0].Model, tc.pref.Devices.PreferredInterfaceModel)
			}
		})
	}
}
