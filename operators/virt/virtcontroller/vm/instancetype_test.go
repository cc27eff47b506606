package vm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/operators/virt/instancetype"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
)

// itNS is where the tests' VMs live (newEnv creates it).
const itNS = virttest.Namespace

// TestInstancetypes runs the VirtualMachine controller (newEnv) on a real
// API server with the graph's VM and instancetype.kubevirt.io CRDs and the
// pinned common-instancetypes bundles applied unchanged (the CRDs accept
// upstream's manifests): a VM with instancetype u1.large and preference
// fedora gets a VMI of 2 vCPUs (sockets) and 8Gi with the preferred disk
// bus and interface model, EFI secure boot and the annotations naming
// both; ControllerRevisions owned by the VM hold them, named in
// status.instancetypeRef/preferenceRef; an edit of the cluster
// instancetype leaves the next VMI of the VM as it was. Without
// interfaces the default NIC takes the preference's model. A VM whose
// template conflicts with its instancetype gets no VMI and a Failure
// condition with KubeVirt's message; one naming a missing instancetype
// waits (FailedFindInstancetype) and starts once it exists.
func TestInstancetypes(t *testing.T) {
	e := newEnv(t)
	c := e.C
	crdtest.Install(t, c, "virtualmachineinstancetypes", "virtualmachineclusterinstancetypes",
		"virtualmachinepreferences", "virtualmachineclusterpreferences")
	ctx := context.Background()
	for _, f := range []string{instancetype.ClusterInstancetypesBundle, instancetype.ClusterPreferencesBundle} {
		objs, err := instancetype.CommonBundle(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("%s %s of the pinned bundle refused: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}

	web := itVM("web", &kubevirtv1.InstancetypeMatcher{Name: "u1.large"},
		&kubevirtv1.PreferenceMatcher{Name: "fedora", Kind: "VirtualMachineClusterPreference"})
	if err := c.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	vmi := waitVMI(t, c, "web", "")
	checkExpanded(t, vmi)

	// The revisions: owned by the VM, named in its status.
	vm := &kubevirtv1.VirtualMachine{}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: itNS, Name: "web"}, vm) == nil &&
			vm.Status.InstancetypeRef != nil && vm.Status.InstancetypeRef.ControllerRevisionRef != nil &&
			vm.Status.PreferenceRef != nil && vm.Status.PreferenceRef.ControllerRevisionRef != nil
	})
	for ref, object := range map[*kubevirtv1.InstancetypeStatusRef]string{vm.Status.InstancetypeRef: "u1.large", vm.Status.PreferenceRef: "fedora"} {
		if ref.Name != object {
			t.Errorf("status ref %+v, want name %s", ref, object)
		}
		cr := &appsv1.ControllerRevision{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: itNS, Name: ref.ControllerRevisionRef.Name}, cr); err != nil {
			t.Fatalf("ControllerRevision %s: %v", ref.ControllerRevisionRef.Name, err)
		}
		if !metav1.IsControlledBy(cr, vm) || cr.Labels["instancetype.kubevirt.io/object-name"] != object ||
			!strings.HasPrefix(cr.Name, "web-"+object+"-v1beta1-") {
			t.Errorf("ControllerRevision %s: owners %v labels %v, want controlled by the VM, of %s", cr.Name, cr.OwnerReferences, cr.Labels, object)
		}
	}
	if vm.Spec.Instancetype.RevisionName != "" {
		t.Errorf("spec.instancetype.revisionName %q: KubeVirt v1.9 records the revision in the status only", vm.Spec.Instancetype.RevisionName)
	}

	// An edit of u1.large does not reach the VM's next VMI.
	it := &unstructured.Unstructured{}
	it.SetGroupVersionKind(instancetype.ClusterInstancetypeGVK)
	if err := c.Get(ctx, types.NamespacedName{Name: "u1.large"}, it); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(it.Object, int64(4), "spec", "cpu", "guest"); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, it); err != nil {
		t.Fatal(err)
	}
	setRunStrategy(t, c, "web", kubevirtv1.RunStrategyHalted)
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: itNS, Name: "web"}, &kubevirtv1.VirtualMachineInstance{}) != nil
	})
	setRunStrategy(t, c, "web", kubevirtv1.RunStrategyAlways)
	next := waitVMI(t, c, "web", vmi.UID)
	checkExpanded(t, next)

	// A new VM takes the edited instancetype.
	if err := c.Create(ctx, itVM("new", &kubevirtv1.InstancetypeMatcher{Name: "u1.large"}, nil)); err != nil {
		t.Fatal(err)
	}
	if got := waitVMI(t, c, "new", "").Spec.Domain.CPU.Sockets; got != 4 {
		t.Errorf("a new VM's VMI has %d sockets, want the edited instancetype's 4", got)
	}

	// Without interfaces, KubeVirt's default NIC takes the preference's
	// model (legacy: e1000), as KubeVirt adds it before the preference.
	bare := itVM("legacy", &kubevirtv1.InstancetypeMatcher{Name: "u1.small"}, &kubevirtv1.PreferenceMatcher{Name: "legacy"})
	bare.Spec.Template.Spec.Domain.Devices.Interfaces, bare.Spec.Template.Spec.Networks = nil, nil
	if err := c.Create(ctx, bare); err != nil {
		t.Fatal(err)
	}
	lv := waitVMI(t, c, "legacy", "")
	if ifs, nets := lv.Spec.Domain.Devices.Interfaces, lv.Spec.Networks; len(ifs) != 1 || ifs[0].Name != "default" || ifs[0].Model != "e1000" ||
		ifs[0].Masquerade == nil || len(nets) != 1 || nets[0].Pod == nil {
		t.Errorf("VMI interfaces %+v networks %+v, want the default masquerade NIC on the pod network, model e1000", ifs, nets)
	}
	if b := lv.Spec.Domain.Devices.Disks[0].Disk; b == nil || b.Bus != kubevirtv1.DiskBusSATA {
		t.Errorf("VMI disk %+v, want legacy's sata bus", lv.Spec.Domain.Devices.Disks[0].DiskDevice)
	}

	// A template setting what the instancetype sets is refused.
	clash := itVM("clash", &kubevirtv1.InstancetypeMatcher{Name: "u1.large"}, nil)
	clash.Spec.Template.Spec.Domain.CPU = &kubevirtv1.CPU{Sockets: 2}
	if err := c.Create(ctx, clash); err != nil {
		t.Fatal(err)
	}
	waitFailure(t, c, "clash", "FailedCreate", "VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type")
	if err := c.Get(ctx, types.NamespacedName{Namespace: itNS, Name: "clash"}, &kubevirtv1.VirtualMachineInstance{}); err == nil {
		t.Error("the conflicting VM got a VMI")
	}

	// A missing instancetype: the VM waits, then starts once it exists.
	if err := c.Create(ctx, itVM("later", &kubevirtv1.InstancetypeMatcher{Name: "x1.later"}, nil)); err != nil {
		t.Fatal(err)
	}
	waitFailure(t, c, "later", "FailedFindInstancetype", `"x1.later" not found`)
	later := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachineClusterInstancetype",
		"metadata": map[string]any{"name": "x1.later"},
		"spec":     map[string]any{"cpu": map[string]any{"guest": int64(3)}, "memory": map[string]any{"guest": "1Gi"}},
	}}
	if err := c.Create(ctx, later); err != nil {
		t.Fatal(err)
	}
	if got := waitVMI(t, c, "later", "").Spec.Domain.CPU.Sockets; got != 3 {
		t.Errorf("VMI of x1.later has %d sockets, want 3", got)
	}
}

// itVM gives a VM in itNS with runStrategy Always, the instancetype and
// preference matchers, and a template with a disk and a pod interface
// that leave bus and model unset.
func itVM(name string, it *kubevirtv1.InstancetypeMatcher, pref *kubevirtv1.PreferenceMatcher) *kubevirtv1.VirtualMachine {
	always := kubevirtv1.RunStrategyAlways
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: itNS, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &always, Instancetype: it, Preference: pref,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{
					Disks:      []kubevirtv1.Disk{{Name: "root"}},
					Interfaces: []kubevirtv1.Interface{{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}},
				}},
				Networks: []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
				Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
					PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "root"}}}}},
			}}},
	}
}

// checkExpanded checks a VMI of u1.large (before its edit) with fedora.
func checkExpanded(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance) {
	t.Helper()
	d := vmi.Spec.Domain
	if c := d.CPU; c == nil || c.Sockets != 2 || c.Cores != 1 || c.Threads != 1 {
		t.Errorf("VMI CPU %+v, want 2 sockets of 1 core and 1 thread", c)
	}
	if d.Memory == nil || d.Memory.Guest == nil || !d.Memory.Guest.Equal(resource.MustParse("8Gi")) {
		t.Errorf("VMI memory %+v, want guest 8Gi", d.Memory)
	}
	if disk := d.Devices.Disks[0]; disk.Disk == nil || disk.Disk.Bus != kubevirtv1.DiskBusVirtio {
		t.Errorf("VMI disk %+v, want fedora's virtio bus", disk.DiskDevice)
	}
	if m := d.Devices.Interfaces[0].Model; m != "virtio" {
		t.Errorf("VMI interface model %q, want fedora's virtio", m)
	}
	if fw := d.Firmware; fw == nil || fw.Bootloader == nil || fw.Bootloader.EFI == nil || fw.Bootloader.EFI.SecureBoot == nil || !*fw.Bootloader.EFI.SecureBoot {
		t.Errorf("VMI firmware %+v, want fedora's EFI with secure boot", fw)
	}
	for k, v := range map[string]string{kubevirtv1.ClusterInstancetypeAnnotation: "u1.large", kubevirtv1.ClusterPreferenceAnnotation: "fedora", "vm.kubevirt.io/os": "linux"} {
		if vmi.Annotations[k] != v {
			t.Errorf("VMI annotation %s=%q, want %q", k, vmi.Annotations[k], v)
		}
	}
}

// waitVMI waits for the VM name's VMI, one whose UID is not old.
func waitVMI(t *testing.T, c client.Client, name string, old types.UID) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	controlplane.Eventually(t, time.Minute, func() bool {
		return c.Get(context.Background(), types.NamespacedName{Namespace: itNS, Name: name}, vmi) == nil && vmi.UID != old
	})
	return vmi
}

// waitFailure waits for the VM name's Failure condition with reason and a
// message containing msg.
func waitFailure(t *testing.T, c client.Client, name, reason, msg string) {
	t.Helper()
	var last kubevirtv1.VirtualMachineCondition
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		vm := &kubevirtv1.VirtualMachine{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: itNS, Name: name}, vm); err == nil {
			for _, cond := range vm.Status.Conditions {
				if cond.Type == kubevirtv1.VirtualMachineFailure {
					last = cond
					if cond.Status == corev1.ConditionTrue && cond.Reason == reason && strings.Contains(cond.Message, msg) {
						return
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("VM %s: Failure condition %+v, want reason %s with %q", name, last, reason, msg)
}

// setRunStrategy patches the VM name's runStrategy.
func setRunStrategy(t *testing.T, c client.Client, name string, s kubevirtv1.VirtualMachineRunStrategy) {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: itNS, Name: name}, vm); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.RunStrategy = &s
	if err := c.Patch(context.Background(), vm, patch); err != nil {
		t.Fatal(err)
	}
}
