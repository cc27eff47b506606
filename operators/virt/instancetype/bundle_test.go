package instancetype_test

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/operators/virt/instancetype"
)

// bundle gives the pinned bundle file's objects by name, converted by
// conv; it fails t on any object that does not convert.
func bundle[T any](t *testing.T, file string, conv func(*unstructured.Unstructured) (T, error)) map[string]T {
	t.Helper()
	objs, err := instancetype.CommonBundle(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]T{}
	for _, o := range objs {
		s, err := conv(o)
		if err != nil {
			t.Fatalf("%s: %v", o.GetName(), err)
		}
		out[o.GetName()] = s
	}
	return out
}

// TestCommonBundleExpansion expands instancetypes and preferences of the
// pinned kubevirt/common-instancetypes bundle (components/virt/data/
// common-instancetypes) into a VM's template as KubeVirt does: u1.medium
// is 1 vCPU and 4Gi, u1.large 2 vCPUs and 8Gi (as sockets, KubeVirt's
// default topology), o1.medium overcommits 50 % of 4Gi, and the fedora
// preference gives the disk and interface virtio, an RNG, EFI with secure
// boot, SMM and its annotation, leaving the VM's own choices alone.
func TestCommonBundleExpansion(t *testing.T) {
	its := bundle(t, instancetype.ClusterInstancetypesBundle, instancetype.InstancetypeSpecOf)
	prefs := bundle(t, instancetype.ClusterPreferencesBundle, instancetype.PreferenceSpecOf)
	for _, name := range []string{"u1.medium", "u1.large", "o1.medium", "cx1.large", "fedora", "windows.11", "ubuntu", "rhel.9"} {
		if its[name] == nil && prefs[name] == nil {
			t.Errorf("the pinned bundle has no %s", name)
		}
	}
	template := func() *kubevirtv1.VirtualMachineInstanceTemplateSpec {
		return &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{
				Disks:      []kubevirtv1.Disk{{Name: "root"}, {Name: "data", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSATA}}}},
				Interfaces: []kubevirtv1.Interface{{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}},
			}},
			Networks: []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
		}}
	}
	for _, tc := range []struct {
		it, pref               string
		sockets, cores, thread uint32
		guest, request         string
	}{
		{"u1.medium", "", 1, 1, 1, "4Gi", ""},
		{"u1.large", "", 2, 1, 1, "8Gi", ""},
		{"u1.large", "fedora", 2, 1, 1, "8Gi", ""},
		{"u1.2xlarge", "", 8, 1, 1, "32Gi", ""},
		{"o1.medium", "", 1, 1, 1, "4Gi", "2Gi"},
		{"u1.xlarge", "windows.11", 4, 1, 1, "16Gi", ""},
		{"u1.4xlarge", "rhel.9.dpdk", 2, 4, 2, "64Gi", ""},
	} {
		t.Run(tc.it+"+"+tc.pref, func(t *testing.T) {
			tmpl := template()
			var pref *v1beta1.VirtualMachinePreferenceSpec
			if tc.pref != "" {
				pref = prefs[tc.pref]
			}
			if cs := instancetype.ApplyToVMI(templatePath, its[tc.it], pref, &tmpl.Spec, &tmpl.ObjectMeta); len(cs) > 0 {
				t.Fatal(cs)
			}
			c, m := tmpl.Spec.Domain.CPU, tmpl.Spec.Domain.Memory
			if c.Sockets != tc.sockets || c.Cores != tc.cores || c.Threads != tc.thread {
				t.Errorf("sockets/cores/threads %d/%d/%d, want %d/%d/%d", c.Sockets, c.Cores, c.Threads, tc.sockets, tc.cores, tc.thread)
			}
			if !m.Guest.Equal(resource.MustParse(tc.guest)) {
				t.Errorf("guest memory %s, want %s", m.Guest, tc.guest)
			}
			req, ok := tmpl.Spec.Domain.Resources.Requests[corev1.ResourceMemory]
			if (tc.request == "") == ok || (ok && !req.Equal(resource.MustParse(tc.request))) {
				t.Errorf("memory request %v (set %v), want %q", req.String(), ok, tc.request)
			}
		})
	}

	// rhel.9.dpdk spreads across sockets, cores and 2 threads with a
	// ratio of 4: 4 vCPUs do not divide.
	if c := instancetype.CheckSpreadCPUTopology(its["u1.xlarge"], prefs["rhel.9.dpdk"]); c == nil {
		t.Error("u1.xlarge spread by rhel.9.dpdk accepted, want refused")
	}

	t.Run("fedora", func(t *testing.T) {
		tmpl := template()
		if cs := instancetype.ApplyToVMI(templatePath, its["u1.large"], prefs["fedora"], &tmpl.Spec, &tmpl.ObjectMeta); len(cs) > 0 {
			t.Fatal(cs)
		}
		d := tmpl.Spec.Domain
		if d.Devices.Disks[0].Disk == nil || d.Devices.Disks[0].Disk.Bus != kubevirtv1.DiskBusVirtio {
			t.Errorf("root disk %+v, want a virtio disk", d.Devices.Disks[0].DiskDevice)
		}
		if d.Devices.Disks[1].Disk.Bus != kubevirtv1.DiskBusSATA {
			t.Errorf("data disk bus %s, want the VM's sata", d.Devices.Disks[1].Disk.Bus)
		}
		if d.Devices.Interfaces[0].Model != "virtio" {
			t.Errorf("interface model %q, want virtio", d.Devices.Interfaces[0].Model)
		}
		if d.Devices.Rng == nil || d.Features == nil || d.Features.SMM == nil {
			t.Errorf("rng %v features %+v, want an RNG and SMM", d.Devices.Rng, d.Features)
		}
		if d.Firmware == nil || d.Firmware.Bootloader.EFI == nil || d.Firmware.Bootloader.EFI.SecureBoot == nil || !*d.Firmware.Bootloader.EFI.SecureBoot {
			t.Errorf("firmware %+v, want EFI with secure boot", d.Firmware)
		}
		if tmpl.ObjectMeta.Annotations["vm.kubevirt.io/os"] != "linux" {
			t.Errorf("annotations %v, want vm.kubevirt.io/os=linux", tmpl.ObjectMeta.Annotations)
		}
		if cs, err := instancetype.CheckRequirements(its["u1.large"], prefs["fedora"], &tmpl.Spec); err != nil {
			t.Errorf("u1.large does not meet fedora's requirements: %v %v", cs, err)
		}
		nano := template()
		if cs := instancetype.ApplyToVMI(templatePath, its["u1.nano"], prefs["fedora"], &nano.Spec, &nano.ObjectMeta); len(cs) > 0 {
			t.Fatal(cs)
		}
		if _, err := instancetype.CheckRequirements(its["u1.nano"], prefs["fedora"], &nano.Spec); err == nil ||
			err.Error() != "insufficient Memory resources of 512Mi provided by instance type, preference requires 2Gi" {
			t.Errorf("u1.nano against fedora's requirements: %v, want short of memory", err)
		}
	})
}

// TestCommonInstancetypesDerived: the virt component (KubeVirt #Roles)
// derives every object of the pinned bundles, with the bundle's names,
// labels, annotations and specs (commoninstancetypes_gen.cue is current),
// and none when commonInstancetypesDeployment.enabled is false (kubevirt
// pkg/virt-operator/resource/apply/reconcile.go).
func TestCommonInstancetypesDerived(t *testing.T) {
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	var want []*unstructured.Unstructured
	for _, f := range []string{instancetype.ClusterInstancetypesBundle, instancetype.ClusterPreferencesBundle} {
		objs, err := instancetype.CommonBundle(f)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, objs...)
	}
	if len(want) < 100 {
		t.Fatalf("the pinned bundles hold %d objects, want the 119 of common-instancetypes v1.7.0", len(want))
	}
	derive := func(conf map[string]any) map[string]*unstructured.Unstructured {
		t.Helper()
		cr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
			"metadata": map[string]any{"name": "kubevirt-kubevirt-hyperconverged", "namespace": "kubevirt-hyperconverged"},
			"spec":     map[string]any{"configuration": conf}}}
		r, err := e.Roles("KubeVirt", cr, graph.RoleInputs{Namespace: "kubevirt-hyperconverged", Images: map[string]string{"node": "converge-node:test"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Refusals) > 0 {
			t.Fatal(r.Refusals)
		}
		out := map[string]*unstructured.Unstructured{}
		for _, o := range r.Objects {
			if o.GroupVersionKind().Group == "instancetype.kubevirt.io" {
				out[o.GetKind()+"/"+o.GetName()] = o
			}
		}
		return out
	}
	got := derive(map[string]any{})
	if len(got) != len(want) {
		t.Errorf("derived %d instancetype.kubevirt.io objects, want the %d of the pinned bundles", len(got), len(want))
	}
	kinds := map[string]int{}
	for _, w := range want {
		kinds[w.GetKind()]++
		g := got[w.GetKind()+"/"+w.GetName()]
		if g == nil {
			t.Errorf("%s %s not derived", w.GetKind(), w.GetName())
			continue
		}
		if !sameJSON(t, w.Object["spec"], g.Object["spec"]) {
			t.Errorf("%s: spec %v, want the bundle's %v", w.GetName(), g.Object["spec"], w.Object["spec"])
		}
		if !reflect.DeepEqual(g.GetAnnotations(), w.GetAnnotations()) {
			t.Errorf("%s: annotations %v, want the bundle's %v", w.GetName(), g.GetAnnotations(), w.GetAnnotations())
		}
		for k, v := range w.GetLabels() {
			if g.GetLabels()[k] != v {
				t.Errorf("%s: label %s=%q, want the bundle's %q", w.GetName(), k, g.GetLabels()[k], v)
			}
		}
		if g.GetLabels()["app.kubernetes.io/managed-by"] != "converge" || g.GetLabels()["app.kubernetes.io/component"] != "compute" {
			t.Errorf("%s: labels %v, want the component's", w.GetName(), g.GetLabels())
		}
	}
	t.Logf("derived %d cluster instancetypes and %d cluster preferences", kinds["VirtualMachineClusterInstancetype"], kinds["VirtualMachineClusterPreference"])
	if n := len(derive(map[string]any{"commonInstancetypesDeployment": map[string]any{"enabled": false}})); n != 0 {
		t.Errorf("derived %d instancetype.kubevirt.io objects with commonInstancetypesDeployment disabled, want none", n)
	}
}

func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	norm := func(v any) any {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
