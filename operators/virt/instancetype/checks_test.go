package instancetype_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"

	"github.com/converge-dev/converge/operators/virt/instancetype"
)

// TestCheckSpreadCPUTopology: vCPUs the spread cannot divide are refused
// at instancetype.spec.cpu.guest with KubeVirt's messages (kubevirt
// pkg/instancetype/preference/validation/cpu_test.go).
func TestCheckSpreadCPUTopology(t *testing.T) {
	spread := func(across *v1beta1.SpreadAcross, ratio *uint32) *v1beta1.VirtualMachinePreferenceSpec {
		return &v1beta1.VirtualMachinePreferenceSpec{CPU: &v1beta1.CPUPreferences{PreferredCPUTopology: ptr(v1beta1.Spread),
			SpreadOptions: &v1beta1.SpreadOptions{Across: across, Ratio: ratio}}}
	}
	for _, tc := range []struct {
		name  string
		vCPUs uint32
		pref  *v1beta1.VirtualMachinePreferenceSpec
		want  string
	}{
		{"sockets topology is never checked", 3, &v1beta1.VirtualMachinePreferenceSpec{}, ""},
		{"SocketsCores 4 by 2", 4, spread(nil, nil), ""},
		{"SocketsCores 3 by 2", 3, spread(nil, nil),
			"3 vCPUs provided by the instance type are not divisible by the Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of 2 provided by the preference"},
		{"CoresThreads 3 by 2", 3, spread(ptr(v1beta1.SpreadAcrossCoresThreads), nil),
			"3 vCPUs provided by the instance type are not divisible by the number of threads per core 2"},
		{"SocketsCoresThreads 6 by 2 threads and ratio 2", 6, spread(ptr(v1beta1.SpreadAcrossSocketsCoresThreads), nil),
			"6 vCPUs provided by the instance type are not divisible by the number of threads per core 2 and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of 2"},
		{"SocketsCoresThreads 8", 8, spread(ptr(v1beta1.SpreadAcrossSocketsCoresThreads), nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := instancetype.CheckSpreadCPUTopology(&v1beta1.VirtualMachineInstancetypeSpec{CPU: v1beta1.CPUInstancetype{Guest: tc.vCPUs}}, tc.pref)
			switch {
			case tc.want == "" && c != nil:
				t.Errorf("refused: %v", c)
			case tc.want != "" && c == nil:
				t.Errorf("accepted, want %q", tc.want)
			case tc.want != "" && (c.Error() != tc.want || c.Path.String() != "instancetype.spec.cpu.guest"):
				t.Errorf("%s: %q, want instancetype.spec.cpu.guest: %q", c.Path, c.Error(), tc.want)
			}
		})
	}
}

// TestCheckRequirements: a preference's requirements against the
// instancetype or the VM, with KubeVirt's paths and messages (kubevirt
// pkg/instancetype/preference/requirements/*_test.go).
func TestCheckRequirements(t *testing.T) {
	req := func(cpu uint32, mem string, topo *v1beta1.PreferredCPUTopology) *v1beta1.VirtualMachinePreferenceSpec {
		p := &v1beta1.VirtualMachinePreferenceSpec{Requirements: &v1beta1.PreferenceRequirements{}}
		if cpu > 0 {
			p.Requirements.CPU = &v1beta1.CPUPreferenceRequirement{Guest: cpu}
		}
		if mem != "" {
			p.Requirements.Memory = &v1beta1.MemoryPreferenceRequirement{Guest: resource.MustParse(mem)}
		}
		if topo != nil {
			p.CPU = &v1beta1.CPUPreferences{PreferredCPUTopology: topo}
		}
		return p
	}
	it := func(cpu uint32, mem string) *v1beta1.VirtualMachineInstancetypeSpec {
		return &v1beta1.VirtualMachineInstancetypeSpec{CPU: v1beta1.CPUInstancetype{Guest: cpu}, Memory: v1beta1.MemoryInstancetype{Guest: resource.MustParse(mem)}}
	}
	vm := func(cpu *kubevirtv1.CPU, mem string) *kubevirtv1.VirtualMachineInstanceSpec {
		s := &kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{CPU: cpu}}
		if mem != "" {
			s.Domain.Memory = &kubevirtv1.Memory{Guest: ptr(resource.MustParse(mem))}
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		it    *v1beta1.VirtualMachineInstancetypeSpec
		pref  *v1beta1.VirtualMachinePreferenceSpec
		spec  *kubevirtv1.VirtualMachineInstanceSpec
		paths []string
		msg   string
	}{
		{"instancetype with enough", it(2, "2Gi"), req(2, "2Gi", nil), vm(nil, "2Gi"), nil, ""},
		{"instancetype short of vCPUs", it(1, "2Gi"), req(2, "", nil), vm(nil, "2Gi"), []string{"spec.instancetype"},
			"insufficient CPU resources of 1 vCPU provided by instance type, preference requires 2 vCPU"},
		{"instancetype short of memory", it(2, "1Gi"), req(0, "2Gi", nil), &kubevirtv1.VirtualMachineInstanceSpec{}, []string{"spec.instancetype"},
			"insufficient Memory resources of 1Gi provided by instance type, preference requires 2Gi"},
		{"VM sockets short", nil, req(4, "", ptr(v1beta1.Sockets)), vm(&kubevirtv1.CPU{Sockets: 2}, "1Gi"), []string{"spec.template.spec.domain.cpu.sockets"},
			"insufficient CPU resources of 2 vCPU provided by VirtualMachine, preference requires 4 vCPU provided as sockets"},
		{"VM cores short", nil, req(4, "", ptr(v1beta1.Cores)), vm(&kubevirtv1.CPU{Cores: 2}, "1Gi"), []string{"spec.template.spec.domain.cpu.cores"},
			"insufficient CPU resources of 2 vCPU provided by VirtualMachine, preference requires 4 vCPU provided as cores"},
		{"VM any short", nil, req(4, "", ptr(v1beta1.Any)), vm(&kubevirtv1.CPU{Sockets: 2, Cores: 1, Threads: 1}, "1Gi"),
			[]string{"spec.template.spec.domain.cpu.cores", "spec.template.spec.domain.cpu.sockets", "spec.template.spec.domain.cpu.threads"},
			"insufficient CPU resources of 2 vCPU provided by VirtualMachine, preference requires 4 vCPU provided as cores, sockets and threads"},
		{"VM without CPU defaults to one socket", nil, req(2, "", nil), vm(nil, "1Gi"), []string{"spec.template.spec.domain.cpu.sockets"},
			"insufficient CPU resources of 1 vCPU provided by VirtualMachine, preference requires 2 vCPU provided as sockets"},
		{"VM sockets from the CPU request", nil, req(2, "", nil), &kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
			Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}, nil, ""},
		{"VM memory short", nil, req(0, "2Gi", nil), vm(nil, "1Gi"), []string{"spec.template.spec.domain.memory"},
			"insufficient Memory resources of 1Gi provided by VirtualMachine, preference requires 2Gi"},
		{"VM memory from the request", nil, req(0, "2Gi", nil), &kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
			Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}}}, nil, ""},
		{"VM without memory", nil, req(0, "2Gi", nil), &kubevirtv1.VirtualMachineInstanceSpec{}, []string{"spec.template.spec.domain.memory"},
			"insufficient Memory resources of 0 provided by VirtualMachine, preference requires 2Gi"},
		{"architecture: unset is amd64", nil, &v1beta1.VirtualMachinePreferenceSpec{Requirements: &v1beta1.PreferenceRequirements{Architecture: ptr("amd64")}},
			&kubevirtv1.VirtualMachineInstanceSpec{}, nil, ""},
		{"architecture: arm64 required", nil, &v1beta1.VirtualMachinePreferenceSpec{Requirements: &v1beta1.PreferenceRequirements{Architecture: ptr("arm64")}},
			&kubevirtv1.VirtualMachineInstanceSpec{}, []string{"spec.template.spec.architecture"}, "preference requires architecture arm64 but amd64 is being requested"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := instancetype.CheckRequirements(tc.it, tc.pref, tc.spec)
			var paths []string
			for _, c := range cs {
				paths = append(paths, c.Path.String())
			}
			if !reflect.DeepEqual(paths, tc.paths) {
				t.Errorf("paths %v, want %v", paths, tc.paths)
			}
			switch {
			case tc.msg == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.msg != "" && (err == nil || err.Error() != tc.msg):
				t.Errorf("error %v, want %q", err, tc.msg)
			}
		})
	}
}

// TestValidateMatchers: KubeVirt's matcher checks and messages (kubevirt
// pkg/instancetype/webhooks/vm/mutator.go, mutator_test.go), an unknown
// kind and inferFromVolume refused.
func TestValidateMatchers(t *testing.T) {
	vm := func(it *kubevirtv1.InstancetypeMatcher, p *kubevirtv1.PreferenceMatcher) *kubevirtv1.VirtualMachine {
		return &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Instancetype: it, Preference: p}}
	}
	bad := kubevirtv1.InferFromVolumeFailurePolicy("Maybe")
	for _, tc := range []struct {
		name    string
		vm, old *kubevirtv1.VirtualMachine
		want    []string // "path: message"
	}{
		{"names of every known kind", vm(&kubevirtv1.InstancetypeMatcher{Name: "u1.large", Kind: "VirtualMachineClusterInstancetype"},
			&kubevirtv1.PreferenceMatcher{Name: "fedora", Kind: "virtualmachinepreferences"}), nil, nil},
		{"no kind", vm(&kubevirtv1.InstancetypeMatcher{Name: "a"}, &kubevirtv1.PreferenceMatcher{Name: "b"}), nil, nil},
		{"unknown kinds", vm(&kubevirtv1.InstancetypeMatcher{Name: "a", Kind: "Flavor"}, &kubevirtv1.PreferenceMatcher{Name: "b", Kind: "Taste"}), nil, []string{
			"spec.instancetype.kind: got unexpected kind in InstancetypeMatcher: Flavor",
			"spec.preference.kind: got unexpected kind in PreferenceMatcher: Taste"}},
		{"neither name nor inferFromVolume", vm(&kubevirtv1.InstancetypeMatcher{}, &kubevirtv1.PreferenceMatcher{}), nil, []string{
			"spec.instancetype: Either Name or InferFromVolume should be provided within the InstancetypeMatcher",
			"spec.preference: Either Name or InferFromVolume should be provided within the PreferenceMatcher"}},
		{"inferFromVolume with name and kind", vm(&kubevirtv1.InstancetypeMatcher{Name: "a", Kind: "VirtualMachineInstancetype", InferFromVolume: "root"}, nil), nil, []string{
			"spec.instancetype.name: Name already set, should be cleared before setting inferFromVolume",
			"spec.instancetype.kind: Kind already set, should be cleared before setting inferFromVolume",
			"spec.instancetype.inferFromVolume: " + instancetype.InferFromVolumeReason}},
		{"inferFromVolume", vm(nil, &kubevirtv1.PreferenceMatcher{InferFromVolume: "root"}), nil, []string{
			"spec.preference.inferFromVolume: " + instancetype.InferFromVolumeReason}},
		{"failure policy", vm(&kubevirtv1.InstancetypeMatcher{Name: "a", InferFromVolumeFailurePolicy: &bad}, nil), nil, []string{
			"spec.instancetype.inferFromVolumeFailurePolicy: Invalid value 'Maybe' for InferFromVolumeFailurePolicy"}},
		{"name changed, revisionName kept", vm(&kubevirtv1.InstancetypeMatcher{Name: "b", RevisionName: "r1"}, nil),
			vm(&kubevirtv1.InstancetypeMatcher{Name: "a", RevisionName: "r1"}, nil), []string{
				"spec.instancetype.revisionName: the Matcher Name has been updated without updating the RevisionName"}},
		{"name and revisionName changed", vm(&kubevirtv1.InstancetypeMatcher{Name: "b", RevisionName: "r2"}, nil),
			vm(&kubevirtv1.InstancetypeMatcher{Name: "a", RevisionName: "r1"}, nil), nil},
		{"revisionName cleared with the name", vm(nil, &kubevirtv1.PreferenceMatcher{Name: "b"}),
			vm(nil, &kubevirtv1.PreferenceMatcher{Name: "a", RevisionName: "r1"}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range instancetype.ValidateMatchers(tc.vm, tc.old) {
				got = append(got, c.Path.String()+": "+c.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
