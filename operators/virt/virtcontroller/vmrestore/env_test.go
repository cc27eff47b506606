package vmrestore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmrestore"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmsnapshot"
)

const node = "node-1"

// snapshotOf takes the VirtualMachineSnapshot name of vm and, acting as
// the snapshot controller, cuts its VolumeSnapshots of volumes; it gives
// the snapshot once ready.
func snapshotOf(t *testing.T, e *virttest.Env, name, vm string, volumes ...string) *snapshotv1.VirtualMachineSnapshot {
	t.Helper()
	ctx := context.Background()
	s := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name},
		Spec: snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{Kind: "VirtualMachine", Name: vm}}}
	if err := e.C.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	for _, v := range volumes {
		e.CutVolumeSnapshot(t, vmsnapshot.VolumeSnapshotName(s, v), "1Gi")
	}
	controlplane.Eventually(t, 60*time.Second, func() bool {
		return e.C.Get(ctx, types.NamespacedName{Namespace: e.NS, Name: name}, s) == nil && vmsnapshot.Ready(s)
	})
	return s
}

// restoreTo creates the VirtualMachineRestore name of snapshot into the
// VM target and gives it with its UID.
func restoreTo(t *testing.T, e *virttest.Env, name, snapshot, target string, patches ...string) *snapshotv1.VirtualMachineRestore {
	t.Helper()
	r := &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name},
		Spec: snapshotv1.VirtualMachineRestoreSpec{Target: corev1.TypedLocalObjectReference{Kind: "VirtualMachine", Name: target},
			VirtualMachineSnapshotName: snapshot, Patches: patches}}
	if err := e.C.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitRestore waits up to 60 s until the restore name satisfies ok.
func waitRestore(t *testing.T, e *virttest.Env, name string, ok func(*snapshotv1.VirtualMachineRestore) bool) *snapshotv1.VirtualMachineRestore {
	t.Helper()
	r := &snapshotv1.VirtualMachineRestore{}
	controlplane.Eventually(t, 60*time.Second, func() bool {
		return e.C.Get(context.Background(), types.NamespacedName{Namespace: e.NS, Name: name}, r) == nil && r.Status != nil && ok(r)
	})
	return r
}

func condition(r *snapshotv1.VirtualMachineRestore, t snapshotv1.ConditionType) snapshotv1.Condition {
	for _, c := range r.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return snapshotv1.Condition{}
}

func complete(r *snapshotv1.VirtualMachineRestore) bool {
	return r.Status.Complete != nil && *r.Status.Complete
}

// bindRestored binds the claims the restore created, as the provisioner
// and the PV controller would, once they exist, and checks each is
// restored from its VolumeSnapshot.
func bindRestored(t *testing.T, e *virttest.Env, r *snapshotv1.VirtualMachineRestore) {
	t.Helper()
	r = waitRestore(t, e, r.Name, func(r *snapshotv1.VirtualMachineRestore) bool { return len(r.Status.Restores) > 0 })
	for _, vr := range r.Status.Restores {
		pvc := &corev1.PersistentVolumeClaim{}
		controlplane.Eventually(t, 30*time.Second, func() bool {
			return e.C.Get(context.Background(), types.NamespacedName{Namespace: e.NS, Name: vr.PersistentVolumeClaimName}, pvc) == nil
		})
		if ds := pvc.Spec.DataSource; ds == nil || ds.Kind != "VolumeSnapshot" || ds.Name != vr.VolumeSnapshotName {
			t.Errorf("claim %s data source %+v, want VolumeSnapshot %s", pvc.Name, ds, vr.VolumeSnapshotName)
		}
		e.Bind(t, vr.PersistentVolumeClaimName, node)
	}
}

// TestRestore: on a real API server with the snapshot and restore
// controllers, a snapshot of a VM (a dataVolumeTemplates root disk, a PVC
// data disk, cloud-init) is restored into a new VM (created Halted,
// spec.patches applied, its volumes on the restored claims it owns), then
// into the VM itself: while it runs the restore waits with KubeVirt's
// message; stopped, the VM's volumes move to the restored claims, the
// DataVolume of the dropped template is deleted and listed in
// deletedDataVolumes, and the restore completes. A restore into an
// existing VM other than the source is refused with KubeVirt's message.
func TestRestore(t *testing.T) {
	e := virttest.NewWithSnapshots(t, func(mgr ctrl.Manager) error {
		if err := vmsnapshot.SetupWithManager(mgr, vmsnapshot.Options{SkipNameValidation: true}); err != nil {
			return err
		}
		return vmrestore.SetupWithManager(mgr, vmrestore.Options{SkipNameValidation: true})
	})
	ctx := context.Background()
	// The source VM, as the VM and DataVolume controllers leave it.
	halted := kubevirtv1.RunStrategyHalted
	src := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "src", Labels: map[string]string{"app": "db"}},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted,
			DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "src-root"},
				Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}}}},
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: []kubevirtv1.Volume{
				{Name: "root", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "src-root"}}},
				{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
					PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "src-data"}}}},
				{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config"}}},
			}}}}}
	if err := e.C.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "src-root"}, Spec: src.Spec.DataVolumeTemplates[0].Spec}
	if err := e.C.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	e.DataVolumeDone(t, "src-root", node)
	e.CreateBound(t, "src-data", node)
	snap := snapshotOf(t, e, "before", "src", "root", "data")

	t.Run("to a new VM", func(t *testing.T) {
		r := restoreTo(t, e, "to-copy", snap.Name, "copy", `{"op": "replace", "path": "/metadata/labels/app", "value": "db-copy"}`)
		bindRestored(t, e, r)
		r = waitRestore(t, e, r.Name, complete)
		if r.Status.RestoreTime == nil || condition(r, snapshotv1.ConditionReady).Status != corev1.ConditionTrue ||
			condition(r, snapshotv1.ConditionProgressing).Reason != "Operation complete" {
			t.Errorf("status %+v, want restoreTime and Ready True, Operation complete", r.Status)
		}
		vm := e.VM(t, "copy")
		if vm.Spec.RunStrategy == nil || *vm.Spec.RunStrategy != kubevirtv1.RunStrategyHalted || vm.Labels["app"] != "db-copy" {
			t.Errorf("new VM runStrategy %v labels %v, want Halted and the patched label", vm.Spec.RunStrategy, vm.Labels)
		}
		if vm.Annotations[vmrestore.LastRestoreAnnotation] != vmrestore.LastRestoreValue(r) {
			t.Errorf("new VM annotations %v", vm.Annotations)
		}
		checkVolumes(t, e, vm, r)
	})

	t.Run("to another existing VM", func(t *testing.T) {
		r := restoreTo(t, e, "onto-copy", snap.Name, "copy")
		r = waitRestore(t, e, r.Name, func(r *snapshotv1.VirtualMachineRestore) bool {
			return condition(r, snapshotv1.ConditionProgressing).Reason == vmrestore.ExistingTargetMessage
		})
		if complete(r) || condition(r, snapshotv1.ConditionReady).Status != corev1.ConditionFalse {
			t.Errorf("status %+v, want incomplete and not Ready", r.Status)
		}
	})

	t.Run("to the source, once stopped", func(t *testing.T) {
		vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "src"}}
		if err := e.C.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		r := restoreTo(t, e, "in-place", snap.Name, "src")
		r = waitRestore(t, e, r.Name, func(r *snapshotv1.VirtualMachineRestore) bool {
			return condition(r, snapshotv1.ConditionProgressing).Reason == vmrestore.WaitGracePeriodMessage
		})
		if len(r.Status.Restores) != 0 {
			t.Errorf("restores %+v while the target runs, want none", r.Status.Restores)
		}
		if err := e.C.Delete(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		bindRestored(t, e, r)
		r = waitRestore(t, e, r.Name, complete)
		if !slices.Equal(r.Status.DeletedDataVolumes, []string{"src-root"}) {
			t.Errorf("deletedDataVolumes %v, want [src-root]", r.Status.DeletedDataVolumes)
		}
		controlplane.Eventually(t, 30*time.Second, func() bool {
			err := e.C.Get(ctx, types.NamespacedName{Namespace: e.NS, Name: "src-root"}, &cdiv1.DataVolume{})
			return apierrors.IsNotFound(err)
		})
		vm := e.VM(t, "src")
		if vm.UID != src.UID || vm.Spec.RunStrategy == nil || *vm.Spec.RunStrategy != kubevirtv1.RunStrategyHalted || vm.Status.RestoreInProgress != nil {
			t.Errorf("VM uid %s runStrategy %v restoreInProgress %v, want the same VM, Halted as before, none", vm.UID, vm.Spec.RunStrategy, vm.Status.RestoreInProgress)
		}
		checkVolumes(t, e, vm, r)
	})
}

// checkVolumes checks that vm's root and data volumes are claims of the
// restore, owned by vm, its cloud-init volume kept and its
// dataVolumeTemplates gone.
func checkVolumes(t *testing.T, e *virttest.Env, vm *kubevirtv1.VirtualMachine, r *snapshotv1.VirtualMachineRestore) {
	t.Helper()
	want := map[string]string{}
	for _, vr := range r.Status.Restores {
		want[vr.VolumeName] = vr.PersistentVolumeClaimName
	}
	vols := vm.Spec.Template.Spec.Volumes
	if len(vols) != 3 || vols[2].CloudInitNoCloud == nil || len(vm.Spec.DataVolumeTemplates) != 0 {
		t.Fatalf("volumes %+v templates %v, want root, data, ci and no templates", vols, vm.Spec.DataVolumeTemplates)
	}
	for _, v := range vols[:2] {
		if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != want[v.Name] || want[v.Name] == "" {
			t.Errorf("volume %s %+v, want claim %q", v.Name, v.VolumeSource, want[v.Name])
			continue
		}
		pvc := &corev1.PersistentVolumeClaim{}
		controlplane.Eventually(t, 30*time.Second, func() bool {
			if e.C.Get(context.Background(), types.NamespacedName{Namespace: e.NS, Name: want[v.Name]}, pvc) != nil {
				return false
			}
			o := metav1.GetControllerOf(pvc)
			return o != nil && o.Kind == "VirtualMachine" && o.UID == vm.UID
		})
	}
}
