package vmsnapshot_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmsnapshot"
)

const node = "node-1"

// newEnv runs the snapshot controller against a real API server with the
// engine's snapshot CRDs and the pinned VolumeSnapshot CRDs.
func newEnv(t *testing.T) *virttest.Env {
	return virttest.NewWithSnapshots(t, func(mgr ctrl.Manager) error {
		return vmsnapshot.SetupWithManager(mgr, vmsnapshot.Options{SkipNameValidation: true})
	})
}

// createVM creates the VM name with a DataVolume root disk (its
// DataVolume done, claim bound), a PVC data disk (bound), a containerDisk
// and a cloud-init disk, with run strategy s.
func createVM(t *testing.T, e *virttest.Env, name string, s kubevirtv1.VirtualMachineRunStrategy) {
	t.Helper()
	ctx := context.Background()
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name + "-root"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}}}
	if err := e.C.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	e.DataVolumeDone(t, name+"-root", node)
	e.CreateBound(t, name+"-data", node)
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &s, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: []kubevirtv1.Volume{
				{Name: "root", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: name + "-root"}}},
				{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
					PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name + "-data"}}}},
				{Name: "cd", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "example/disk"}}},
				{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config"}}},
			}}}}}
	if err := e.C.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
}

// snapshot creates the VirtualMachineSnapshot name of vm.
func snapshot(t *testing.T, e *virttest.Env, name, vm string, policy snapshotv1.DeletionPolicy) *snapshotv1.VirtualMachineSnapshot {
	t.Helper()
	group := "kubevirt.io"
	s := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name},
		Spec: snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: vm}, DeletionPolicy: &policy}}
	if err := e.C.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitSnapshot waits up to 60 s until the snapshot name satisfies ok and
// gives it.
func waitSnapshot(t *testing.T, e *virttest.Env, name string, ok func(*snapshotv1.VirtualMachineSnapshot) bool) *snapshotv1.VirtualMachineSnapshot {
	t.Helper()
	s := &snapshotv1.VirtualMachineSnapshot{}
	controlplane.Eventually(t, 60*time.Second, func() bool {
		return e.C.Get(context.Background(), types.NamespacedName{Namespace: e.NS, Name: name}, s) == nil && ok(s)
	})
	return s
}

func cond(s *snapshotv1.VirtualMachineSnapshot, t snapshotv1.ConditionType) snapshotv1.Condition {
	if s.Status != nil {
		for _, c := range s.Status.Conditions {
			if c.Type == t {
				return c
			}
		}
	}
	return snapshotv1.Condition{}
}

// TestSnapshot: snapshots of a stopped and of a running VM on a real API
// server. The content holds the VM and one backup per claim, one
// VolumeSnapshot each of the StorageClass's VolumeSnapshotClass; the
// snapshot is Succeeded and ready once the VolumeSnapshots are, with
// KubeVirt's conditions, snapshotVolumes, and for the running VM the
// Online and NoGuestAgent indications; the VM is locked while in progress
// and unlocked after; deletionPolicy Delete takes the content along,
// Retain keeps it.
func TestSnapshot(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	checkCRDs(t, e)
	tests := []struct {
		name    string
		running bool
		policy  snapshotv1.DeletionPolicy
	}{
		{"stopped VM, Delete", false, snapshotv1.VirtualMachineSnapshotContentDelete},
		{"running VM, Retain", true, snapshotv1.VirtualMachineSnapshotContentRetain},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmName := []string{"stopped", "running"}[i]
			rs := kubevirtv1.RunStrategyHalted
			if tt.running {
				rs = kubevirtv1.RunStrategyAlways
			}
			createVM(t, e, vmName, rs)
			if tt.running {
				vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: vmName}}
				if err := e.C.Create(ctx, vmi); err != nil {
					t.Fatal(err)
				}
				e.SetPhase(t, vmName, kubevirtv1.Running)
			}
			s := snapshot(t, e, vmName+"-snap", vmName, tt.policy)
			s = waitSnapshot(t, e, s.Name, func(s *snapshotv1.VirtualMachineSnapshot) bool {
				return s.Status != nil && s.UID != "" && len(s.Finalizers) > 0
			})
			vsRoot, vsData := vmsnapshot.VolumeSnapshotName(s, "root"), vmsnapshot.VolumeSnapshotName(s, "data")
			// In progress: the VM is locked, the content and the
			// VolumeSnapshots exist.
			root := e.VolumeSnapshot(t, vsRoot)
			if root.Spec.VolumeSnapshotClassName == nil || *root.Spec.VolumeSnapshotClassName != "hostpath-snapshots" ||
				root.Spec.Source.PersistentVolumeClaimName == nil || *root.Spec.Source.PersistentVolumeClaimName != vmName+"-root" {
				t.Errorf("VolumeSnapshot %s spec %+v, want class hostpath-snapshots of claim %s-root", vsRoot, root.Spec, vmName)
			}
			if root.Labels[vmsnapshot.SourceNameLabel] != vmName {
				t.Errorf("VolumeSnapshot labels %v, want the source VM", root.Labels)
			}
			vm := e.VM(t, vmName)
			if vm.Status.SnapshotInProgress == nil || *vm.Status.SnapshotInProgress != s.Name || !slices.Contains(vm.Finalizers, vmsnapshot.SourceFinalizer) {
				t.Errorf("VM not locked: snapshotInProgress %v finalizers %v", vm.Status.SnapshotInProgress, vm.Finalizers)
			}
			inProgress := waitSnapshot(t, e, s.Name, func(s *snapshotv1.VirtualMachineSnapshot) bool {
				return s.Status.Phase == snapshotv1.InProgress && cond(s, snapshotv1.ConditionProgressing).Reason == vmsnapshot.LockedMsg
			})
			if tt.running && !slices.Equal(inProgress.Status.Indications, []snapshotv1.Indication{snapshotv1.VMSnapshotNoGuestAgentIndication, snapshotv1.VMSnapshotOnlineSnapshotIndication}) {
				t.Errorf("indications %v, want NoGuestAgent and Online", inProgress.Status.Indications)
			}
			if !tt.running && len(inProgress.Status.Indications) != 0 {
				t.Errorf("indications %v of a stopped VM, want none", inProgress.Status.Indications)
			}
			e.CutVolumeSnapshot(t, vsRoot, "1Gi")
			e.CutVolumeSnapshot(t, vsData, "1Gi")
			done := waitSnapshot(t, e, s.Name, func(s *snapshotv1.VirtualMachineSnapshot) bool {
				return s.Status.Phase == snapshotv1.Succeeded && s.Status.ReadyToUse != nil && *s.Status.ReadyToUse
			})
			if c := cond(done, snapshotv1.ConditionReady); c.Status != corev1.ConditionTrue || c.Reason != "Ready" {
				t.Errorf("Ready condition %+v", c)
			}
			if c := cond(done, snapshotv1.ConditionProgressing); c.Status != corev1.ConditionFalse || c.Reason != "Operation complete" {
				t.Errorf("Progressing condition %+v", c)
			}
			if done.Status.CreationTime == nil || done.Status.SourceUID == nil || *done.Status.SourceUID != vm.UID {
				t.Errorf("creationTime %v sourceUID %v, want set and %s", done.Status.CreationTime, done.Status.SourceUID, vm.UID)
			}
			if v := done.Status.SnapshotVolumes; v == nil || !slices.Equal(v.IncludedVolumes, []string{"root", "data"}) || !slices.Equal(v.ExcludedVolumes, []string{"cd", "ci"}) {
				t.Errorf("snapshotVolumes %+v, want root, data included and cd, ci excluded", v)
			}
			content := &snapshotv1.VirtualMachineSnapshotContent{}
			if err := e.C.Get(ctx, types.NamespacedName{Namespace: e.NS, Name: *done.Status.VirtualMachineSnapshotContentName}, content); err != nil {
				t.Fatal(err)
			}
			if src := content.Spec.Source.VirtualMachine; src == nil || src.Name != vmName || len(src.Spec.Template.Spec.Volumes) != 4 {
				t.Errorf("content source %+v, want the VM %s with its 4 volumes", content.Spec.Source, vmName)
			}
			if len(content.Spec.VolumeBackups) != 2 || content.Spec.VolumeBackups[0].PersistentVolumeClaim.Name != vmName+"-root" {
				t.Errorf("volume backups %+v, want root and data", content.Spec.VolumeBackups)
			}
			controlplane.Eventually(t, 30*time.Second, func() bool {
				vm := e.VM(t, vmName)
				return vm.Status.SnapshotInProgress == nil && !slices.Contains(vm.Finalizers, vmsnapshot.SourceFinalizer)
			})
			// Deleting the snapshot: the content goes with Delete and
			// stays, released, with Retain.
			if err := e.C.Delete(ctx, done); err != nil {
				t.Fatal(err)
			}
			controlplane.Eventually(t, 30*time.Second, func() bool {
				return apierrors.IsNotFound(e.C.Get(ctx, types.NamespacedName{Namespace: e.NS, Name: s.Name}, &snapshotv1.VirtualMachineSnapshot{}))
			})
			controlplane.Eventually(t, 30*time.Second, func() bool {
				c := &snapshotv1.VirtualMachineSnapshotContent{}
				err := e.C.Get(ctx, types.NamespacedName{Namespace: e.NS, Name: content.Name}, c)
				if tt.policy == snapshotv1.VirtualMachineSnapshotContentDelete {
					return apierrors.IsNotFound(err) || c.DeletionTimestamp != nil
				}
				return err == nil && c.DeletionTimestamp == nil && !slices.Contains(c.Finalizers, vmsnapshot.ContentFinalizer)
			})
		})
	}
}

// TestSnapshotRefusals: a source kind converge cannot snapshot fails
// naming spec.source; a volume whose StorageClass has no
// VolumeSnapshotClass is excluded and the snapshot is partial.
func TestSnapshotRefusals(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	bad := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "of-a-pod"},
		Spec: snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{Kind: "Pod", Name: "p"}}}
	if err := e.C.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	got := waitSnapshot(t, e, bad.Name, func(s *snapshotv1.VirtualMachineSnapshot) bool {
		return s.Status != nil && s.Status.Phase == snapshotv1.Failed
	})
	if got.Status.Error == nil || got.Status.Error.Message == nil || !containsAll(*got.Status.Error.Message, "spec.source", "Pod", "VirtualMachine") {
		t.Errorf("error %+v, want one naming spec.source, Pod and VirtualMachine", got.Status.Error)
	}

	createVM(t, e, "mixed", kubevirtv1.RunStrategyHalted)
	// The data claim moves to a class whose driver has no
	// VolumeSnapshotClass: only root is snapshotted.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vm := e.VM(t, "mixed")
		vm.Spec.Template.Spec.Volumes[1].PersistentVolumeClaim.ClaimName = "other-data"
		return e.C.Update(ctx, vm)
	}); err != nil {
		t.Fatal(err)
	}
	other := virttest.PVC("other-data")
	class := "no-snapshots"
	other.Spec.StorageClassName = &class
	if err := e.C.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	e.Bind(t, "other-data", node)
	s := snapshot(t, e, "mixed-snap", "mixed", snapshotv1.VirtualMachineSnapshotContentDelete)
	s = waitSnapshot(t, e, s.Name, func(s *snapshotv1.VirtualMachineSnapshot) bool { return s.UID != "" })
	e.CutVolumeSnapshot(t, vmsnapshot.VolumeSnapshotName(s, "root"), "1Gi")
	done := waitSnapshot(t, e, s.Name, func(s *snapshotv1.VirtualMachineSnapshot) bool {
		return s.Status != nil && s.Status.Phase == snapshotv1.Succeeded && s.Status.SnapshotVolumes != nil
	})
	if v := done.Status.SnapshotVolumes; !slices.Equal(v.IncludedVolumes, []string{"root"}) || !slices.Equal(v.ExcludedVolumes, []string{"data", "cd", "ci"}) {
		t.Errorf("snapshotVolumes %+v, want root included, data, cd, ci excluded", v)
	}
	if !slices.Contains(done.Status.Indications, snapshotv1.VMSnapshotPartialSnapshotIndication) {
		t.Errorf("indications %v, want PartialSnapshot", done.Status.Indications)
	}
	if err := e.C.Get(ctx, types.NamespacedName{Namespace: e.NS, Name: vmsnapshot.VolumeSnapshotName(s, "data")}, &snapv1.VolumeSnapshot{}); !apierrors.IsNotFound(err) {
		t.Error("a VolumeSnapshot of the claim without a VolumeSnapshotClass was created")
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// checkCRDs checks the engine's snapshot.kubevirt.io CRDs as served:
// KubeVirt's printer columns and short names.
func checkCRDs(t *testing.T, e *virttest.Env) {
	t.Helper()
	want := map[string][]string{
		"virtualmachinesnapshots.snapshot.kubevirt.io":        {"SourceKind", "SourceName", "Phase", "ReadyToUse", "CreationTime", "Error", "vmsnapshot"},
		"virtualmachinesnapshotcontents.snapshot.kubevirt.io": {"ReadyToUse", "CreationTime", "Error", "vmsnapshotcontent"},
		"virtualmachinerestores.snapshot.kubevirt.io":         {"TargetKind", "TargetName", "Complete", "RestoreTime", "vmrestore"},
	}
	for name, w := range want {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := e.C.Get(context.Background(), types.NamespacedName{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
			got = append(got, c.Name)
		}
		got = append(got, crd.Spec.Names.ShortNames[0])
		if !slices.Equal(got, w) || crd.Spec.Versions[0].Name != "v1beta1" || crd.Spec.Versions[0].Subresources == nil || crd.Spec.Versions[0].Subresources.Status == nil {
			t.Errorf("CRD %s: columns and short name %v, version %s, want %v, v1beta1 with a status subresource", name, got, crd.Spec.Versions[0].Name, w)
		}
	}
}
