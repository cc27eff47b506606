package domain_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	"github.com/converge-dev/converge/api/vmisupport"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// TestGoldenXMLValidates checks every golden domain against libvirt's own
// RelaxNG schema with virt-xml-validate (libvirt-clients + libxml2-utils).
// It skips when the tool is missing, unless CONVERGE_REQUIRE_NODEPLANE=1.
func TestGoldenXMLValidates(t *testing.T) {
	tool, err := exec.LookPath("virt-xml-validate")
	if err == nil {
		_, err = exec.LookPath("xmllint")
	}
	if err != nil {
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatalf("virt-xml-validate/xmllint: %v (apt-get install libvirt-clients libxml2-utils)", err)
		}
		t.Skipf("virt-xml-validate/xmllint not installed: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*.xml"))
	if len(files) == 0 {
		t.Fatal("no golden XML files")
	}
	for _, f := range files {
		out, err := exec.Command(tool, f, "domain").CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
	}
}

func tinyVMI() *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Namespace, vmi.Name, vmi.UID = "ns", "vm", "11111111-2222-3333-4444-555555555555"
	q := mustQuantity("64Mi")
	vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	return vmi
}

func TestBuildOptions(t *testing.T) {
	pvc := tinyVMI()
	pvc.Spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "d"}}
	pvc.Spec.Volumes = []kubevirtv1.Volume{{Name: "d", VolumeSource: kubevirtv1.VolumeSource{
		PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{}}}}
	pvc.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "c"
	nic := tinyVMI()
	nic.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "n", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}}
	nic.Spec.Networks = []kubevirtv1.Network{{Name: "n", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
	hostModel := tinyVMI()
	hostModel.Spec.Domain.CPU = &kubevirtv1.CPU{Model: kubevirtv1.CPUModeHostModel}

	kvm := domain.DefaultOptions()
	kvm.DomainType = "kvm"
	bad := domain.DefaultOptions()
	bad.DomainType = "xen"

	for _, tc := range []struct {
		name    string
		vmi     *kubevirtv1.VirtualMachineInstance
		opts    domain.Options
		wantErr string
		check   func(t *testing.T, d *libvirtxml.Domain)
	}{
		{name: "defaults are qemu/q35 and never kvm", vmi: tinyVMI(), opts: domain.DefaultOptions(), check: func(t *testing.T, d *libvirtxml.Domain) {
			if d.Type != "qemu" || d.OS.Type.Machine != "q35" || d.Devices.Emulator != "/usr/bin/qemu-system-x86_64" {
				t.Errorf("type=%s machine=%s emulator=%s", d.Type, d.OS.Type.Machine, d.Devices.Emulator)
			}
			if len(d.Devices.Serials) != 1 || d.Devices.Serials[0].Log != nil {
				t.Errorf("expected one serial console without log (no log dir): %+v", d.Devices.Serials)
			}
		}},
		{name: "unknown domain type", vmi: tinyVMI(), opts: bad, wantErr: `VirtualMachineInstance ns/vm: domain type "xen": expected qemu, kvm or test`},
		{name: "no PVC resolver", vmi: pvc, opts: domain.DefaultOptions(), wantErr: `VirtualMachineInstance ns/vm: spec.volumes[0].persistentVolumeClaim: claim "c": this node has no PVC resolver`},
		{name: "no bridge resolver", vmi: nic, opts: domain.DefaultOptions(), wantErr: `VirtualMachineInstance ns/vm: spec.networks[0]: network "n": this node has no bridge resolver`},
		{name: "host-model refused on TCG", vmi: hostModel, opts: domain.DefaultOptions(), wantErr: "spec.domain.cpu.model: host-model needs domain type kvm"},
		{name: "host-model accepted when kvm is asked for", vmi: hostModel, opts: kvm, check: func(t *testing.T, d *libvirtxml.Domain) {
			if d.Type != "kvm" || d.CPU.Mode != "host-model" {
				t.Errorf("type=%s cpu mode=%s", d.Type, d.CPU.Mode)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := domain.Build(tc.vmi, tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, d)
		})
	}
}

func TestBuildDoesNotModifyVMI(t *testing.T) {
	vmi := readVMI(t, filepath.Join(goldenDir, "full.yaml"))
	before := vmi.DeepCopy()
	if _, err := domain.Build(vmi, testOptions()); err != nil {
		t.Fatal(err)
	}
	if !equalJSON(t, before, vmi) {
		t.Error("Build modified its VMI")
	}
}

func TestFieldErrorsAreTyped(t *testing.T) {
	vmi := tinyVMI()
	vmi.Spec.Domain.Devices.GPUs = []kubevirtv1.GPU{{Name: "g", DeviceName: "x"}}
	_, err := domain.Build(vmi, domain.DefaultOptions())
	var fe vmisupport.FieldErrors
	if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Path != "spec.domain.devices.gpus" {
		t.Fatalf("got %#v", err)
	}
	if got, want := err.Error(), "VirtualMachineInstance ns/vm: spec.domain.devices.gpus: not supported by converge"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestNamesAndMetadata(t *testing.T) {
	if ns, n, ok := domain.SplitName(domain.Name("team-a", "vm-1")); !ok || ns != "team-a" || n != "vm-1" {
		t.Errorf("SplitName round trip: %q %q %v", ns, n, ok)
	}
	for _, bad := range []string{"test", "_x", "x_"} {
		if _, _, ok := domain.SplitName(bad); ok {
			t.Errorf("SplitName(%q) accepted", bad)
		}
	}
	if a, b := domain.MAC("uid", "eth"), domain.MAC("uid", "eth"); a != b || !strings.HasPrefix(a, "52:54:00:") {
		t.Errorf("MAC not stable or not QEMU-prefixed: %s %s", a, b)
	}
	if domain.MAC("uid", "a") == domain.MAC("uid", "b") {
		t.Error("MAC ignores the interface name")
	}
	d, err := domain.Build(tinyVMI(), domain.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// as libvirt gives it back: a prefixed element
	back := strings.Replace(strings.Replace(s, "<vmi xmlns=", "<cv:vmi xmlns:cv=", 1), "</vmi>", "</cv:vmi>", 1)
	m, ok := domain.MetadataOf(back)
	if !ok || m.Namespace != "ns" || m.Name != "vm" || m.UID != "11111111-2222-3333-4444-555555555555" {
		t.Errorf("MetadataOf of the prefixed element: %+v %v", m, ok)
	}
	if m, ok := domain.MetadataOf(s); !ok || m.Namespace != "ns" || m.Name != "vm" || m.UID != "11111111-2222-3333-4444-555555555555" {
		t.Errorf("MetadataOf of the built XML: %+v %v", m, ok)
	}
	if _, ok := domain.MetadataOf(`<domain><name>test</name></domain>`); ok {
		t.Error("a domain without metadata is converge's")
	}
}

func TestDecodeVMIRefusesUnknownFields(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"kind: VirtualMachineInstance\nspec:\n  domian: {cpu: {cores: 1}}\n", `unknown field "spec.domian"`},
		{"kind: VirtualMachineInstance\nspec:\n  domain:\n    devices:\n      disks:\n        - name: a\n          bsu: virtio\n", `unknown field "spec.domain.devices.disks[0].bsu"`},
		{"kind: VirtualMachineInstance\nmetdata: {name: x}\n", `unknown field "metdata"`},
		{"kind: VirtualMachineInstance\nspec:\n  domain:\n    devices:\n      disks:\n        - name: a\n          disk: {readonly: false}\n", ""},
	} {
		_, err := domain.DecodeVMI([]byte(tc.doc))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.doc, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.doc, err, tc.want)
		}
	}
}
