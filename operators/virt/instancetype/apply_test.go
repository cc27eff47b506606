package instancetype_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"

	"github.com/converge-dev/converge/operators/virt/instancetype"
)

var templatePath = field.NewPath("spec", "template", "spec")

func ptr[T any](v T) *T { return &v }

// TestGuestCPUTopology: the instancetype's vCPUs laid out per the
// preference's preferredCPUTopology. Cases from KubeVirt's
// pkg/instancetype/apply/cpu_test.go ("should default to PreferSockets",
// PreferAny, PreferCores, PreferThreads, PreferSpread entries).
func TestGuestCPUTopology(t *testing.T) {
	topo := func(p v1beta1.PreferredCPUTopology) *v1beta1.VirtualMachinePreferenceSpec {
		return &v1beta1.VirtualMachinePreferenceSpec{CPU: &v1beta1.CPUPreferences{PreferredCPUTopology: &p}}
	}
	spread := func(across *v1beta1.SpreadAcross, ratio *uint32) *v1beta1.VirtualMachinePreferenceSpec {
		p := topo(v1beta1.Spread)
		p.CPU.SpreadOptions = &v1beta1.SpreadOptions{Across: across, Ratio: ratio}
		return p
	}
	sct, ct := ptr(v1beta1.SpreadAcrossSocketsCoresThreads), ptr(v1beta1.SpreadAcrossCoresThreads)
	for _, tc := range []struct {
		name                   string
		vCPUs                  uint32
		pref                   *v1beta1.VirtualMachinePreferenceSpec
		sockets, cores, thread uint32
	}{
		{"no preference: sockets", 2, nil, 2, 1, 1},
		{"preference without topology: sockets", 4, &v1beta1.VirtualMachinePreferenceSpec{}, 4, 1, 1},
		{"one vCPU", 1, topo(v1beta1.Cores), 1, 1, 1},
		{"sockets", 2, topo(v1beta1.Sockets), 2, 1, 1},
		{"any is sockets", 2, topo(v1beta1.Any), 2, 1, 1},
		{"cores", 2, topo(v1beta1.Cores), 1, 2, 1},
		{"threads", 2, topo(v1beta1.Threads), 1, 1, 2},
		{"deprecated preferCores", 4, topo(v1beta1.DeprecatedPreferCores), 1, 4, 1},
		{"deprecated preferThreads", 4, topo(v1beta1.DeprecatedPreferThreads), 1, 1, 4},
		{"spread, 1 vCPU", 1, spread(nil, nil), 1, 1, 1},
		{"spread 2, default 1:2:1", 2, spread(nil, nil), 1, 2, 1},
		{"spread 4, default 1:2:1", 4, spread(nil, nil), 2, 2, 1},
		{"spread 6, default 1:2:1", 6, spread(nil, nil), 3, 2, 1},
		{"spread 8, default 1:2:1", 8, spread(nil, nil), 4, 2, 1},
		{"spread 3, ratio 1:3:1", 3, spread(nil, ptr(uint32(3))), 1, 3, 1},
		{"spread 12, ratio 1:3:1", 12, spread(nil, ptr(uint32(3))), 4, 3, 1},
		{"spread 16, ratio 1:4:1", 16, spread(nil, ptr(uint32(4))), 4, 4, 1},
		{"deprecated preferSpreadSocketToCoreRatio 3", 9, &v1beta1.VirtualMachinePreferenceSpec{
			CPU: &v1beta1.CPUPreferences{PreferredCPUTopology: ptr(v1beta1.DeprecatedPreferSpread)}, PreferSpreadSocketToCoreRatio: 3}, 3, 3, 1},
		{"spread SocketsCoresThreads 4, 1:2:2", 4, spread(sct, nil), 1, 2, 2},
		{"spread SocketsCoresThreads 16, 1:2:2", 16, spread(sct, nil), 4, 2, 2},
		{"spread SocketsCoresThreads 12, 1:3:2", 12, spread(sct, ptr(uint32(3))), 2, 3, 2},
		{"spread SocketsCoresThreads 36, 1:4:2", 36, spread(sct, ptr(uint32(4))), 4, 4, 2},
		{"spread CoresThreads 2, 1:2", 2, spread(ct, nil), 1, 1, 2},
		{"spread CoresThreads 8, 1:2", 8, spread(ct, nil), 1, 4, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := &v1beta1.VirtualMachineInstancetypeSpec{CPU: v1beta1.CPUInstancetype{Guest: tc.vCPUs}, Memory: v1beta1.MemoryInstancetype{Guest: resource.MustParse("1Gi")}}
			spec, meta := &kubevirtv1.VirtualMachineInstanceSpec{}, &metav1.ObjectMeta{}
			if cs := instancetype.ApplyToVMI(templatePath, it, tc.pref, spec, meta); len(cs) > 0 {
				t.Fatalf("conflicts: %v", cs)
			}
			c := spec.Domain.CPU
			if c.Sockets != tc.sockets || c.Cores != tc.cores || c.Threads != tc.thread {
				t.Errorf("sockets/cores/threads = %d/%d/%d, want %d/%d/%d", c.Sockets, c.Cores, c.Threads, tc.sockets, tc.cores, tc.thread)
			}
		})
	}
}

// TestApplyInstancetypeFields: every field of the instancetype reaches the
// VMI spec (KubeVirt cpu_test.go "should apply in full", memory_test.go,
// nodeselector, scheduler, iothreads, gpu, hostdevices, launchsecurity and
// annotations tests).
func TestApplyInstancetypeFields(t *testing.T) {
	it := &v1beta1.VirtualMachineInstancetypeSpec{
		CPU: v1beta1.CPUInstancetype{Guest: 2, Model: ptr("host-passthrough"), DedicatedCPUPlacement: ptr(true),
			IsolateEmulatorThread: ptr(true), NUMA: &kubevirtv1.NUMA{GuestMappingPassthrough: &kubevirtv1.NUMAGuestMappingPassthrough{}},
			Realtime: &kubevirtv1.Realtime{Mask: "0-3,^1"}, MaxSockets: ptr(uint32(6))},
		Memory: v1beta1.MemoryInstancetype{Guest: resource.MustParse("512M"), Hugepages: &kubevirtv1.Hugepages{PageSize: "1Gi"},
			MaxGuest: ptr(resource.MustParse("2G"))},
		NodeSelector:    map[string]string{"node": "big"},
		SchedulerName:   "sched",
		IOThreadsPolicy: ptr(kubevirtv1.IOThreadsPolicyAuto),
		IOThreads:       &kubevirtv1.DiskIOThreads{SupplementalPoolThreadCount: ptr(uint32(4))},
		LaunchSecurity:  &kubevirtv1.LaunchSecurity{SEV: &kubevirtv1.SEV{}},
		GPUs:            []kubevirtv1.GPU{{Name: "gpu1", DeviceName: "nvidia.com/gpu"}},
		HostDevices:     []kubevirtv1.HostDevice{{Name: "hd1", DeviceName: "vendor.com/dev"}},
		Annotations:     map[string]string{"it": "yes"},
	}
	spec, meta := &kubevirtv1.VirtualMachineInstanceSpec{}, &metav1.ObjectMeta{}
	if cs := instancetype.ApplyToVMI(templatePath, it, nil, spec, meta); len(cs) > 0 {
		t.Fatalf("conflicts: %v", cs)
	}
	want := kubevirtv1.VirtualMachineInstanceSpec{
		NodeSelector:  map[string]string{"node": "big"},
		SchedulerName: "sched",
		Domain: kubevirtv1.DomainSpec{
			CPU: &kubevirtv1.CPU{Sockets: 2, Cores: 1, Threads: 1, Model: "host-passthrough", DedicatedCPUPlacement: true,
				IsolateEmulatorThread: true, NUMA: it.CPU.NUMA, Realtime: it.CPU.Realtime, MaxSockets: 6},
			Memory:          &kubevirtv1.Memory{Guest: ptr(resource.MustParse("512M")), Hugepages: it.Memory.Hugepages, MaxGuest: it.Memory.MaxGuest},
			IOThreadsPolicy: it.IOThreadsPolicy,
			IOThreads:       it.IOThreads,
			LaunchSecurity:  it.LaunchSecurity,
			Devices:         kubevirtv1.Devices{GPUs: it.GPUs, HostDevices: it.HostDevices},
		},
	}
	if !reflect.DeepEqual(*spec, want) {
		t.Errorf("VMI spec:\n%+v\nwant\n%+v", *spec, want)
	}
	if meta.Annotations["it"] != "yes" {
		t.Errorf("annotations %v, want it=yes", meta.Annotations)
	}
}

// TestMemoryOvercommit: overcommitPercent lowers the memory request by
// that much, computed as KubeVirt does (memory_test.go "should apply
// memory overcommit"); the guest memory stays the instancetype's.
func TestMemoryOvercommit(t *testing.T) {
	for _, tc := range []struct {
		percent int
		guest   string
		want    int64
	}{
		{15, "4Gi", int64(float32(4<<30) * (1 - float32(15)/100))},
		{50, "512M", 256000000},
		{0, "512M", 0},
	} {
		it := &v1beta1.VirtualMachineInstancetypeSpec{CPU: v1beta1.CPUInstancetype{Guest: 1},
			Memory: v1beta1.MemoryInstancetype{Guest: resource.MustParse(tc.guest), OvercommitPercent: tc.percent}}
		spec := &kubevirtv1.VirtualMachineInstanceSpec{}
		if cs := instancetype.ApplyToVMI(templatePath, it, nil, spec, &metav1.ObjectMeta{}); len(cs) > 0 {
			t.Fatalf("conflicts: %v", cs)
		}
		req, ok := spec.Domain.Resources.Requests[corev1.ResourceMemory]
		switch {
		case tc.want == 0 && ok:
			t.Errorf("%d%%: memory request %s, want none", tc.percent, req.String())
		case tc.want != 0 && req.Value() != tc.want:
			t.Errorf("%d%% of %s: memory request %d, want %d", tc.percent, tc.guest, req.Value(), tc.want)
		}
		if !spec.Domain.Memory.Guest.Equal(resource.MustParse(tc.guest)) {
			t.Errorf("guest memory %s, want %s", spec.Domain.Memory.Guest, tc.guest)
		}
	}
}

// TestApplyConflicts: a VM setting a field its instancetype sets is
// refused with the path and KubeVirt's message, and nothing of the
// preference is applied (KubeVirt apply/cpu_test.go, memory_test.go,
// gpu_test.go, hostdevices_test.go, nodeselector_test.go,
// scheduler_test.go, iothreadpolicy_test.go, launchsecurity_test.go,
// annotations_test.go "should return a conflict").
func TestApplyConflicts(t *testing.T) {
	base := func() *v1beta1.VirtualMachineInstancetypeSpec {
		return &v1beta1.VirtualMachineInstancetypeSpec{CPU: v1beta1.CPUInstancetype{Guest: 2}, Memory: v1beta1.MemoryInstancetype{Guest: resource.MustParse("1Gi")}}
	}
	for _, tc := range []struct {
		name  string
		it    func(*v1beta1.VirtualMachineInstancetypeSpec)
		vm    func(*kubevirtv1.VirtualMachineInstanceSpec, *metav1.ObjectMeta)
		paths []string
	}{
		{"cpu topology", nil, func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
			s.Domain.CPU = &kubevirtv1.CPU{Cores: 4, Sockets: 1, Threads: 1}
		}, []string{"spec.template.spec.domain.cpu.sockets", "spec.template.spec.domain.cpu.cores", "spec.template.spec.domain.cpu.threads"}},
		{"cpu sockets", nil, func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
			s.Domain.CPU = &kubevirtv1.CPU{Sockets: 2}
		}, []string{"spec.template.spec.domain.cpu.sockets"}},
		{"cpu requests and limits", nil, func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
			s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			s.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, []string{"spec.template.spec.domain.resources.requests.cpu", "spec.template.spec.domain.resources.limits.cpu"}},
		{"cpu model set by both", func(it *v1beta1.VirtualMachineInstancetypeSpec) { it.CPU.Model = ptr("Skylake") },
			func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.CPU = &kubevirtv1.CPU{Model: "Haswell"}
			},
			[]string{"spec.template.spec.domain.cpu.model"}},
		{"cpu dedicated placement set by both", func(it *v1beta1.VirtualMachineInstancetypeSpec) { it.CPU.DedicatedCPUPlacement = ptr(true) },
			func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.CPU = &kubevirtv1.CPU{DedicatedCPUPlacement: true}
			}, []string{"spec.template.spec.domain.cpu.dedicatedCPUPlacement"}},
		{"memory guest", nil, func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
			s.Domain.Memory = &kubevirtv1.Memory{Guest: ptr(resource.MustParse("512M"))}
		}, []string{"spec.template.spec.domain.memory.guest"}},
		{"memory request", nil, func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
			s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
		}, []string{"spec.template.spec.domain.resources.requests.memory"}},
		{"memory limit", nil, func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
			s.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
		}, []string{"spec.template.spec.domain.resources.limits.memory"}},
		{"hugepages set by both", func(it *v1beta1.VirtualMachineInstancetypeSpec) {
			it.Memory.Hugepages = &kubevirtv1.Hugepages{PageSize: "2Mi"}
		},
			func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.Memory = &kubevirtv1.Memory{Hugepages: &kubevirtv1.Hugepages{PageSize: "1Gi"}}
			}, []string{"spec.template.spec.domain.memory.hugepages"}},
		{"node selector", func(it *v1beta1.VirtualMachineInstancetypeSpec) { it.NodeSelector = map[string]string{"a": "b"} },
			func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.NodeSelector = map[string]string{"c": "d"}
			},
			[]string{"spec.template.spec.nodeSelector"}},
		{"scheduler name", func(it *v1beta1.VirtualMachineInstancetypeSpec) { it.SchedulerName = "a" },
			func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) { s.SchedulerName = "b" },
			[]string{"spec.template.spec.schedulerName"}},
		{"io threads policy", func(it *v1beta1.VirtualMachineInstancetypeSpec) {
			it.IOThreadsPolicy = ptr(kubevirtv1.IOThreadsPolicyAuto)
		},
			func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.IOThreadsPolicy = ptr(kubevirtv1.IOThreadsPolicyShared)
			},
			[]string{"spec.template.spec.domain.ioThreadsPolicy"}},
		{"gpus", func(it *v1beta1.VirtualMachineInstancetypeSpec) { it.GPUs = []kubevirtv1.GPU{{Name: "a"}} },
			func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.Devices.GPUs = []kubevirtv1.GPU{{Name: "b"}}
			},
			[]string{"spec.template.spec.domain.devices.gpus"}},
		{"host devices", func(it *v1beta1.VirtualMachineInstancetypeSpec) {
			it.HostDevices = []kubevirtv1.HostDevice{{Name: "a"}}
		},
			func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.Devices.HostDevices = []kubevirtv1.HostDevice{{Name: "b"}}
			}, []string{"spec.template.spec.domain.devices.hostDevices"}},
		{"launch security", func(it *v1beta1.VirtualMachineInstancetypeSpec) {
			it.LaunchSecurity = &kubevirtv1.LaunchSecurity{TDX: &kubevirtv1.TDX{}}
		},
			func(s *kubevirtv1.VirtualMachineInstanceSpec, _ *metav1.ObjectMeta) {
				s.Domain.LaunchSecurity = &kubevirtv1.LaunchSecurity{SEV: &kubevirtv1.SEV{}}
			}, []string{"spec.template.spec.domain.launchSecurity"}},
		{"annotation with another value", func(it *v1beta1.VirtualMachineInstancetypeSpec) { it.Annotations = map[string]string{"k": "it"} },
			func(_ *kubevirtv1.VirtualMachineInstanceSpec, m *metav1.ObjectMeta) {
				m.Annotations = map[string]string{"k": "vm"}
			},
			[]string{"annotations.k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := base()
			if tc.it != nil {
				tc.it(it)
			}
			spec, meta := &kubevirtv1.VirtualMachineInstanceSpec{}, &metav1.ObjectMeta{}
			tc.vm(spec, meta)
			pref := &v1beta1.VirtualMachinePreferenceSpec{Machine: &v1beta1.MachinePreferences{PreferredMachineType: "q35"}}
			cs := instancetype.ApplyToVMI(templatePath, it, pref, spec, meta)
			var got []string
			for _, c := range cs {
				got = append(got, c.Path.String())
			}
			if !reflect.DeepEqual(got, tc.paths) {
				t.Fatalf("conflicts %v, want %v", got, tc.paths)
			}
			want := "VM field(s) " + tc.paths[0]
			for _, p := range tc.paths[1:] {
				want += ", " + p
			}
			if want += " conflicts with selected instance type"; cs.Error() != want {
				t.Errorf("message %q, want %q", cs.Error(), want)
			}
			if spec.Domain.Machine != nil {
				t.Error("the preference was applied despite the conflicts")
			}
		})
	}
}

// TestApplyNoInstancetypeNoPreference: neither leaves the spec alone.
func TestApplyNoInstancetypeNoPreference(t *testing.T) {
	spec, meta := &kubevirtv1.VirtualMachineInstanceSpec{}, &metav1.ObjectMeta{}
	if cs := instancetype.ApplyToVMI(templatePath, nil, nil, spec, meta); cs != nil {
		t.Fatal(cs)
	}
	if !reflect.DeepEqual(*spec, kubevirtv1.VirtualMachineInstanceSpec{}) || meta.Annotations != nil {
		t.Errorf("changed: %+v %+v", spec, meta)
	}
}
