package vm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/cdi/datavolume"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
	vmcontroller "github.com/converge-dev/converge/operators/virt/virtcontroller/vm"
)

// dvTemplate is a dataVolumeTemplate name importing url into 1Gi.
func dvTemplate(name, url string) kubevirtv1.DataVolumeTemplateSpec {
	return kubevirtv1.DataVolumeTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"disk": name}},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: url}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
	}
}

// dvVM is a VM name, Always, whose VMI uses the DataVolumes of templates
// (one dataVolume volume each).
func dvVM(name string, templates ...kubevirtv1.DataVolumeTemplateSpec) *kubevirtv1.VirtualMachine {
	always := kubevirtv1.RunStrategyAlways
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: virttest.Namespace, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &always, DataVolumeTemplates: templates,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
				Memory: &kubevirtv1.Memory{Guest: resource.NewQuantity(64<<20, resource.BinarySI)}}}}},
	}
	for _, t := range templates {
		vm.Spec.Template.Spec.Domain.Devices.Disks = append(vm.Spec.Template.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: t.Name})
		vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, kubevirtv1.Volume{Name: t.Name,
			VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: t.Name}}})
	}
	return vm
}

// dv gives the DataVolume name, nil when there is none.
func (e *env) dv(t *testing.T, name string) *cdiv1.DataVolume {
	t.Helper()
	dv := &cdiv1.DataVolume{}
	if err := e.C.Get(context.Background(), types.NamespacedName{Namespace: e.NS, Name: name}, dv); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		t.Fatal(err)
	}
	return dv
}

// vmCondition gives the VM's condition c as "Status/Reason: message", ""
// when absent.
func vmCondition(vm *kubevirtv1.VirtualMachine, c kubevirtv1.VirtualMachineConditionType) string {
	for _, x := range vm.Status.Conditions {
		if x.Type == c {
			return fmt.Sprintf("%s/%s: %s", x.Status, x.Reason, x.Message)
		}
	}
	return ""
}

// TestDataVolumeTemplates: a VM with two dataVolumeTemplates gets both
// DataVolumes, named as the templates in its namespace, labelled
// kubevirt.io/created-by, annotated for claim adoption and controlled by
// the VM (deleting the VM deletes them through the garbage collector);
// no VMI exists and the VM reads Provisioning until both are Succeeded
// (written here as converge's DataVolume controller and cdi-importer
// agent would, with their claims bound on node a); then the VMI is
// created, placed on a (where the volumes are), and the VM reads Starting.
// A DataVolume that fails turns another VM DataVolumeError, with no VMI.
func TestDataVolumeTemplates(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.AddNode(t, virttest.Node("a", "4", "8Gi", map[string]string{v1alpha1.HostpathTopologyKey: "a"}))
	e.AddNode(t, virttest.Node("b", "8", "16Gi", map[string]string{v1alpha1.HostpathTopologyKey: "b"}))
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("last state:", last)
		}
	})
	state := func(name string) (*kubevirtv1.VirtualMachine, *kubevirtv1.VirtualMachineInstance) {
		vm, vmi := e.VM(t, name), e.VMI(t, name)
		last = describe(vm, vmi) + "; conditions " + fmt.Sprint(vm.Status.Conditions)
		return vm, vmi
	}

	vm := dvVM("two", dvTemplate("two-root", "http://images.local/root.img"), dvTemplate("two-data", "http://images.local/data.img"))
	vm.Spec.Template.Spec.PriorityClassName = "vm-high"
	if err := e.C.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vm, _ := state("two")
		return e.dv(t, "two-root") != nil && e.dv(t, "two-data") != nil && vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusProvisioning
	})
	vm = e.VM(t, "two")
	for _, name := range []string{"two-root", "two-data"} {
		dv := e.dv(t, name)
		if !metav1.IsControlledBy(dv, vm) || dv.OwnerReferences[0].BlockOwnerDeletion == nil || !*dv.OwnerReferences[0].BlockOwnerDeletion {
			t.Errorf("DataVolume %s: owner references %+v, want the VM as controller blocking its deletion", name, dv.OwnerReferences)
		}
		if dv.Labels[kubevirtv1.CreatedByLabel] != string(vm.UID) || dv.Labels["disk"] != name {
			t.Errorf("DataVolume %s: labels %v, want the template's and %s=%s", name, dv.Labels, kubevirtv1.CreatedByLabel, vm.UID)
		}
		if dv.Annotations[vmcontroller.AllowClaimAdoptionAnnotation] != "true" {
			t.Errorf("DataVolume %s: annotations %v, want %s=true", name, dv.Annotations, vmcontroller.AllowClaimAdoptionAnnotation)
		}
		if dv.Spec.Source == nil || dv.Spec.Source.HTTP == nil || dv.Spec.PriorityClassName != "vm-high" {
			t.Errorf("DataVolume %s: spec %+v, want the template's source and the VMI's priorityClassName", name, dv.Spec)
		}
	}

	e.DataVolumeDone(t, "two-root", "a")
	time.Sleep(time.Second) // one DataVolume of two: still no VMI
	if vm, vmi := state("two"); vmi != nil || vm.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusProvisioning {
		t.Fatalf("with one DataVolume of two Succeeded: %s, want no VMI and Provisioning", last)
	}
	e.DataVolumeDone(t, "two-data", "a")
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vm, vmi := state("two")
		return vmi != nil && vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStarting
	})
	controlplane.Eventually(t, 30*time.Second, func() bool {
		_, vmi := state("two")
		return vmi.Status.NodeName != ""
	})
	if n := e.VMI(t, "two").Status.NodeName; n != "a" {
		t.Errorf("VMI two went to %q, want a, where its volumes are (b is emptier)", n)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vm, _ := state("two")
		return vmCondition(vm, kubevirtv1.VirtualMachineConditionType(kubevirtv1.VirtualMachineInstanceDataVolumesReady)) ==
			"True/AllDVsReady: All of the VMI's DVs are bound and ready"
	})

	// A failed import.
	if err := e.C.Create(ctx, dvVM("broken", dvTemplate("broken-root", "http://images.local/missing.img"))); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.dv(t, "broken-root") != nil })
	e.SetDataVolumeStatus(t, "broken-root", cdiv1.DataVolumeStatus{Phase: cdiv1.ImportInProgress, RestartCount: 1,
		Conditions: []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: "HTTPError", Message: "404 Not Found"}}})
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vm, vmi := state("broken")
		return vmi == nil && vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusDataVolumeError
	})
	e.SetDataVolumeStatus(t, "broken-root", cdiv1.DataVolumeStatus{Phase: cdiv1.Failed,
		Conditions: []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: "HTTPError", Message: "404 Not Found"}}})
	time.Sleep(time.Second)
	if vm, vmi := state("broken"); vmi != nil || vm.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusDataVolumeError {
		t.Fatalf("with its DataVolume Failed: %s, want no VMI and DataVolumeError", last)
	}
}

// TestDataVolumeAdoption: as KubeVirt's ClaimMatchedDataVolumes, a
// DataVolume named by a template that no controller owns is adopted (a
// controller reference to the VM added, its spec kept, not recreated) and
// used; one another VM controls is used but left to it.
func TestDataVolumeAdoption(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.AddNode(t, virttest.Node("a", "4", "8Gi", map[string]string{v1alpha1.HostpathTopologyKey: "a"}))
	orphan := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "orphan", Labels: map[string]string{"mine": "yes"}},
		Spec: dvTemplate("orphan", "http://images.local/old.img").Spec}
	if err := e.C.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	e.DataVolumeDone(t, "orphan", "a")
	other := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "other"},
		Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}}}
	if err := e.C.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	yes := true
	owned := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "owned",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "other", UID: other.UID, Controller: &yes}}},
		Spec: dvTemplate("owned", "http://images.local/other.img").Spec}
	if err := e.C.Create(ctx, owned); err != nil {
		t.Fatal(err)
	}
	e.DataVolumeDone(t, "owned", "a")
	orphanUID, ownedUID := e.dv(t, "orphan").UID, e.dv(t, "owned").UID

	if err := e.C.Create(ctx, dvVM("adopter", dvTemplate("orphan", "http://images.local/new.img"), dvTemplate("owned", "http://images.local/new.img"))); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return metav1.IsControlledBy(e.dv(t, "orphan"), e.VM(t, "adopter")) && e.VMI(t, "adopter") != nil
	})
	if dv := e.dv(t, "orphan"); dv.UID != orphanUID || dv.Spec.Source.HTTP.URL != "http://images.local/old.img" || dv.Labels["mine"] != "yes" {
		t.Errorf("adopted DataVolume orphan: uid %s (was %s), url %s, labels %v: want it kept as it was", dv.UID, orphanUID, dv.Spec.Source.HTTP.URL, dv.Labels)
	}
	if dv := e.dv(t, "owned"); dv.UID != ownedUID || !metav1.IsControlledBy(dv, other) || len(dv.OwnerReferences) != 1 {
		t.Errorf("DataVolume owned: uid %s (was %s), owners %+v: want it left to VM other", dv.UID, ownedUID, dv.OwnerReferences)
	}
}

// TestImmediateDataVolumeCreationFalse: with
// kubevirt.io/immediate-data-volume-creation: "false" a Halted VM gets no
// DataVolume; once started (Always) it gets them, and its VMI once they
// are Succeeded.
func TestImmediateDataVolumeCreationFalse(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.AddNode(t, virttest.Node("a", "4", "8Gi", map[string]string{v1alpha1.HostpathTopologyKey: "a"}))
	vm := dvVM("lazy", dvTemplate("lazy-root", "http://images.local/root.img"))
	halted := kubevirtv1.RunStrategyHalted
	vm.Spec.RunStrategy = &halted
	vm.Annotations = map[string]string{kubevirtv1.ImmediateDataVolumeCreation: "false"}
	if err := e.C.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return e.VM(t, "lazy").Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStopped
	})
	time.Sleep(time.Second)
	if e.dv(t, "lazy-root") != nil {
		t.Fatal("a Halted VM with immediate-data-volume-creation false got its DataVolume")
	}
	cur := e.VM(t, "lazy")
	patch := client.MergeFrom(cur.DeepCopy())
	always := kubevirtv1.RunStrategyAlways
	cur.Spec.RunStrategy = &always
	if err := e.C.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.dv(t, "lazy-root") != nil })
	if e.VMI(t, "lazy") != nil {
		t.Fatal("VMI created before its DataVolume Succeeded")
	}
	e.DataVolumeDone(t, "lazy-root", "a")
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.VMI(t, "lazy") != nil })
}

// TestDataVolumeCreateRefused: a template the API server refuses (here a
// name that is no DNS subdomain) gives the VM KubeVirt's Failure condition
// naming the DataVolume error, and no VMI.
func TestDataVolumeCreateRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.C.Create(ctx, dvVM("refused", dvTemplate("Not_A_Name", "http://images.local/root.img"))); err != nil {
		t.Fatal(err)
	}
	want := "True/FailedCreate: Error encountered while creating DataVolumes: failed to create DataVolume: "
	var last string
	controlplane.Eventually(t, 30*time.Second, func() bool {
		last = vmCondition(e.VM(t, "refused"), kubevirtv1.VirtualMachineFailure)
		return strings.HasPrefix(last, want) && strings.Contains(last, "Not_A_Name")
	})
	t.Logf("Failure condition: %s", last)
	if e.VMI(t, "refused") != nil {
		t.Fatal("VMI created though its DataVolume could not be")
	}
}

// TestClaimStatuses: a VM whose claim does not exist reads ErrorPvcNotFound
// with the VMI's Synchronized condition (KubeVirt's FailedPvcNotFound); a
// VM whose WaitForFirstConsumer claim waits to be provisioned on its VMI's
// node reads WaitingForVolumeBinding; both start once the claim is bound.
func TestClaimStatuses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	if err := e.C.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: virttest.HostpathClass},
		Provisioner: "kubevirt.io.hostpath-provisioner", VolumeBindingMode: &wffc}); err != nil {
		t.Fatal(err)
	}
	e.AddNode(t, virttest.Node("a", "4", "8Gi", map[string]string{v1alpha1.HostpathTopologyKey: "a"}))
	claimVM := func(name, claim string) *kubevirtv1.VirtualMachine {
		vm := dvVM(name)
		vm.Spec.Template.Spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "disk"}}
		vm.Spec.Template.Spec.Volumes = []kubevirtv1.Volume{{Name: "disk", VolumeSource: kubevirtv1.VolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}
		return vm
	}
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("last state:", last)
		}
	})
	status := func(name string) *kubevirtv1.VirtualMachine {
		vm := e.VM(t, name)
		last = describe(vm, e.VMI(t, name)) + "; conditions " + fmt.Sprint(vm.Status.Conditions)
		return vm
	}

	if err := e.C.Create(ctx, claimVM("missing", "nowhere")); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vm := status("missing")
		return vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusPvcNotFound &&
			vmCondition(vm, kubevirtv1.VirtualMachineConditionType(kubevirtv1.VirtualMachineInstanceSynchronized)) ==
				"False/FailedPvcNotFound: PVC vms/nowhere does not exist, waiting for it to appear"
	})
	e.CreateBound(t, "nowhere", "a")
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vm := status("missing")
		return vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStarting &&
			vmCondition(vm, kubevirtv1.VirtualMachineConditionType(kubevirtv1.VirtualMachineInstanceSynchronized)) == ""
	})

	if err := e.C.Create(ctx, virttest.PVC("later")); err != nil {
		t.Fatal(err)
	}
	if err := e.C.Create(ctx, claimVM("binding", "later")); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return status("binding").Status.PrintableStatus == kubevirtv1.VirtualMachineStatusWaitingForVolumeBinding
	})
	e.Bind(t, "later", "a")
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return status("binding").Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStarting
	})
}

// TestWithDataVolumeController runs converge's DataVolume controller
// (operators/cdi/datavolume) beside the VM controller and the scheduler:
// the VM's DataVolume gets its PVC from it, placed on the importer node
// (volume.kubernetes.io/selected-node, WaitForFirstConsumer storage); the
// test plays the provisioner (the volume bound on that node) and the
// cdi-importer (Succeeded); the VM then starts on that node.
func TestWithDataVolumeController(t *testing.T) {
	vmOpts, schedOpts, dvOpts := vmcontroller.DefaultOptions(), scheduler.DefaultOptions(), datavolume.DefaultOptions()
	vmOpts.SkipNameValidation, schedOpts.SkipNameValidation, dvOpts.SkipNameValidation = true, true, true
	dvOpts.CRDPoll = 100 * time.Millisecond
	e := &env{virttest.New(t,
		func(mgr ctrl.Manager) error { return vmcontroller.SetupWithManager(mgr, vmOpts) },
		func(mgr ctrl.Manager) error { return scheduler.SetupWithManager(mgr, schedOpts) },
		func(mgr ctrl.Manager) error { return datavolume.Setup(mgr, dvOpts) })}
	ctx := context.Background()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	if err := e.C.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: virttest.HostpathClass},
		Provisioner: "kubevirt.io.hostpath-provisioner", VolumeBindingMode: &wffc}); err != nil {
		t.Fatal(err)
	}
	e.AddNode(t, virttest.Node("a", "4", "8Gi", map[string]string{v1alpha1.HostpathTopologyKey: "a"}))
	e.AddNode(t, virttest.Node("b", "8", "16Gi", map[string]string{v1alpha1.HostpathTopologyKey: "b", v1alpha1.ImporterNodeLabel: "true"}))
	tmpl := dvTemplate("web-root", "http://images.local/root.img")
	class := virttest.HostpathClass
	tmpl.Spec.Storage.StorageClassName = &class
	if err := e.C.Create(ctx, dvVM("web", tmpl)); err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{}
	var last string
	controlplane.Eventually(t, 30*time.Second, func() bool {
		err := e.C.Get(ctx, types.NamespacedName{Namespace: e.NS, Name: "web-root"}, claim)
		dv := e.dv(t, "web-root")
		if dv != nil {
			last = fmt.Sprintf("DataVolume %s, claim annotations %v", dv.Status.Phase, claim.Annotations)
		}
		return err == nil && dv != nil && dv.Status.Phase == cdiv1.ImportScheduled && claim.Annotations["volume.kubernetes.io/selected-node"] == "b"
	})
	if vm := e.VM(t, "web"); vm.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusProvisioning || e.VMI(t, "web") != nil {
		t.Fatalf("VM %s with its DataVolume ImportScheduled (%s), want Provisioning and no VMI", vm.Status.PrintableStatus, last)
	}
	e.Bind(t, "web-root", "b")
	e.SetDataVolumeStatus(t, "web-root", cdiv1.DataVolumeStatus{Phase: cdiv1.Succeeded, ClaimName: "web-root", Progress: "100.0%",
		Conditions: []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeReady, Status: corev1.ConditionTrue}}})
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vmi := e.VMI(t, "web")
		return vmi != nil && vmi.Status.NodeName == "b"
	})
}
