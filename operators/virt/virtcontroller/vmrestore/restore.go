package vmrestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmsnapshot"
)

// Finalizer holds a VirtualMachineRestore until the target's
// status.restoreInProgress is cleared.
const Finalizer = "snapshot.kubevirt.io/vmrestore-protection"

// KubeVirt's restore messages (restore.go).
var (
	// WaitGracePeriodMessage is the reason while a running target is
	// waited for under WaitGracePeriod.
	WaitGracePeriodMessage = fmt.Sprintf("Waiting for target VM to be powered off. Please stop the restore target to proceed with restore, or the operation will fail after %s", snapshotv1.DefaultGracePeriod)
	// GracePeriodExceededMessage fails the restore after it.
	GracePeriodExceededMessage = fmt.Sprintf("Restore target failed to be ready within %s. Please power off the target VM before attempting restore", snapshotv1.DefaultGracePeriod)
)

const (
	// WaitEventuallyMessage is the reason under WaitEventually.
	WaitEventuallyMessage = "Waiting for target VM to be powered off. Please stop the restore target to proceed with restore"
	// StopTargetMessage is the reason under StopTarget.
	StopTargetMessage = "Automatically stopping restore target for restore operation"
	// TargetNotReadyMessage fails the restore under FailImmediate.
	TargetNotReadyMessage = "Restore target VMI must be powered off before restore operation"
	// ExistingTargetMessage refuses a target that exists and is not the
	// snapshot's source.
	ExistingTargetMessage = "restore source and restore target are different but restore target already exists"
)

// waiting is an error that is the restore's state to report, not a
// failure of the pass (the watches bring it back).
type waiting struct{ error }

// Reconciler drives VirtualMachineRestores.
type Reconciler struct {
	Client client.Client
}

// Reconcile runs one pass over the VirtualMachineRestore req, as
// KubeVirt's updateVMRestore.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	in := &snapshotv1.VirtualMachineRestore{}
	if err := r.Client.Get(ctx, req.NamespacedName, in); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := metav1.Now()
	out := in.DeepCopy()
	if out.Status == nil {
		f := false
		out.Status = &snapshotv1.VirtualMachineRestoreStatus{Complete: &f}
		setConditions(out, corev1.ConditionTrue, "Initializing VirtualMachineRestore", now)
		return ctrl.Result{}, r.writeStatus(ctx, in, out)
	}
	if out.Spec.Target.Kind != "VirtualMachine" || (out.Spec.Target.APIGroup != nil && *out.Spec.Target.APIGroup != kubevirtv1.SchemeGroupVersion.Group) {
		return ctrl.Result{}, r.fail(ctx, in, fmt.Sprintf("spec.target: kind %q cannot be restored to, want kind VirtualMachine of kubevirt.io", out.Spec.Target.Kind), false, now)
	}
	target, err := r.vm(ctx, out.Namespace, out.Spec.Target.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if out.DeletionTimestamp != nil {
		return ctrl.Result{}, r.deleting(ctx, in, target, now)
	}
	if !progressing(out) {
		return ctrl.Result{}, nil
	}
	if len(out.OwnerReferences) == 0 && target != nil {
		out.OwnerReferences = []metav1.OwnerReference{ownerRef(target)}
	}
	controllerutil.AddFinalizer(out, Finalizer)
	if !equality.Semantic.DeepEqual(in.ObjectMeta, out.ObjectMeta) {
		if err := r.Client.Update(ctx, out); err != nil {
			return ctrl.Result{}, err
		}
		in = out.DeepCopy()
	}
	if target != nil {
		running, err := r.running(ctx, target)
		if err != nil {
			return ctrl.Result{}, err
		}
		if running {
			return r.targetNotReady(ctx, in, target, now)
		}
	}
	err = r.restore(ctx, in, out, target, now)
	var w waiting
	if errors.As(err, &w) {
		return ctrl.Result{}, r.fail(ctx, in, w.Error(), false, now)
	}
	return ctrl.Result{}, err
}

// progressing tells whether a restore is neither complete nor failed.
func progressing(r *snapshotv1.VirtualMachineRestore) bool {
	complete := r.Status != nil && r.Status.Complete != nil && *r.Status.Complete
	failed := r.Status != nil && vmsnapshot.HasCondition(r.Status.Conditions, snapshotv1.ConditionFailure)
	return !complete && !failed
}

// setConditions sets Progressing to s and Ready to False, both with reason.
func setConditions(r *snapshotv1.VirtualMachineRestore, s corev1.ConditionStatus, reason string, now metav1.Time) {
	r.Status.Conditions = vmsnapshot.SetCondition(r.Status.Conditions, vmsnapshot.Condition(snapshotv1.ConditionProgressing, s, reason, now))
	r.Status.Conditions = vmsnapshot.SetCondition(r.Status.Conditions, vmsnapshot.Condition(snapshotv1.ConditionReady, corev1.ConditionFalse, reason, now))
}

func ownerRef(vm *kubevirtv1.VirtualMachine) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: kubevirtv1.GroupVersion.String(), Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID,
		Controller: &t, BlockOwnerDeletion: &t}
}

// writeStatus writes out's status when it differs from in's.
func (r *Reconciler) writeStatus(ctx context.Context, in, out *snapshotv1.VirtualMachineRestore) error {
	if equality.Semantic.DeepEqual(in.Status, out.Status) {
		return nil
	}
	next := in.DeepCopy()
	next.Status = out.Status
	return client.IgnoreNotFound(r.Client.Status().Update(ctx, next))
}

// fail reports msg on the restore's conditions (Progressing and Ready
// False), and Failure True when final (KubeVirt's
// doUpdateErrorWithFailure).
func (r *Reconciler) fail(ctx context.Context, in *snapshotv1.VirtualMachineRestore, msg string, final bool, now metav1.Time) error {
	out := in.DeepCopy()
	if out.Status == nil {
		out.Status = &snapshotv1.VirtualMachineRestoreStatus{}
	}
	setConditions(out, corev1.ConditionFalse, msg, now)
	if final {
		out.Status.Conditions = vmsnapshot.SetCondition(out.Status.Conditions, vmsnapshot.Condition(snapshotv1.ConditionFailure, corev1.ConditionTrue, msg, now))
	}
	return r.writeStatus(ctx, in, out)
}

// vm reads a VM; nil when there is none.
func (r *Reconciler) vm(ctx context.Context, ns, name string) (*kubevirtv1.VirtualMachine, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, vm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return vm, nil
}

// running tells whether the target has a VMI (KubeVirt's Ready: not).
func (r *Reconciler) running(ctx context.Context, vm *kubevirtv1.VirtualMachine) (bool, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(vm), vmi)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// targetNotReady handles a running target per targetReadinessPolicy
// (KubeVirt's handleVMRestoreTargetNotReady).
func (r *Reconciler) targetNotReady(ctx context.Context, in *snapshotv1.VirtualMachineRestore, target *kubevirtv1.VirtualMachine, now metav1.Time) (ctrl.Result, error) {
	policy := snapshotv1.VirtualMachineRestoreWaitGracePeriodAndFail
	if in.Spec.TargetReadinessPolicy != nil {
		policy = *in.Spec.TargetReadinessPolicy
	}
	switch policy {
	case snapshotv1.VirtualMachineRestoreWaitEventually:
		return ctrl.Result{}, r.fail(ctx, in, WaitEventuallyMessage, false, now)
	case snapshotv1.VirtualMachineRestoreStopTarget:
		if err := r.fail(ctx, in, StopTargetMessage, false, now); err != nil {
			return ctrl.Result{}, err
		}
		patch := client.MergeFrom(target.DeepCopy())
		h := kubevirtv1.RunStrategyHalted
		target.Spec.RunStrategy, target.Spec.Running = &h, nil //nolint:staticcheck // clear the legacy field too, as virtctl stop
		return ctrl.Result{}, r.Client.Patch(ctx, target, patch)
	case snapshotv1.VirtualMachineRestoreWaitGracePeriodAndFail:
		left := time.Until(in.CreationTimestamp.Add(snapshotv1.DefaultGracePeriod))
		if left < 0 {
			return ctrl.Result{}, r.fail(ctx, in, GracePeriodExceededMessage, true, now)
		}
		return ctrl.Result{RequeueAfter: left}, r.fail(ctx, in, WaitGracePeriodMessage, false, now)
	case snapshotv1.VirtualMachineRestoreFailImmediate:
		return ctrl.Result{}, r.fail(ctx, in, TargetNotReadyMessage, true, now)
	}
	return ctrl.Result{}, r.fail(ctx, in, fmt.Sprintf("spec.targetReadinessPolicy: %q, want StopTarget, WaitGracePeriod, FailImmediate or WaitEventually", policy), true, now)
}

// deleting clears the target's restoreInProgress and releases the
// restore (KubeVirt's handleVMRestoreDeletion).
func (r *Reconciler) deleting(ctx context.Context, in *snapshotv1.VirtualMachineRestore, target *kubevirtv1.VirtualMachine, now metav1.Time) error {
	if !controllerutil.ContainsFinalizer(in, Finalizer) {
		return nil
	}
	if target != nil {
		if err := r.doneRestore(ctx, in, target); err != nil {
			return err
		}
	}
	out := in.DeepCopy()
	setConditions(out, corev1.ConditionFalse, "VM restore is deleting", now)
	if !equality.Semantic.DeepEqual(in.Status, out.Status) {
		return r.writeStatus(ctx, in, out)
	}
	patch := client.MergeFromWithOptions(in.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(in, Finalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, in, patch))
}

// doneRestore clears the target's status.restoreInProgress if it names
// this restore.
func (r *Reconciler) doneRestore(ctx context.Context, in *snapshotv1.VirtualMachineRestore, target *kubevirtv1.VirtualMachine) error {
	if p := target.Status.RestoreInProgress; p == nil || *p != in.Name {
		return nil
	}
	patch := client.MergeFrom(target.DeepCopy())
	target.Status.RestoreInProgress = nil
	return r.Client.Status().Patch(ctx, target, patch)
}

// snapshot reads the restore's snapshot and content, both ready
// (KubeVirt's getVMSnapshot and getSnapshotContent); a waiting error
// says which is not.
func (r *Reconciler) snapshot(ctx context.Context, in *snapshotv1.VirtualMachineRestore) (*snapshotv1.VirtualMachineSnapshot, *snapshotv1.VirtualMachineSnapshotContent, error) {
	key := types.NamespacedName{Namespace: in.Namespace, Name: in.Spec.VirtualMachineSnapshotName}
	s := &snapshotv1.VirtualMachineSnapshot{}
	if err := r.Client.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, waiting{fmt.Errorf("VMSnapshot %s does not exist", key)}
		}
		return nil, nil, err
	}
	switch {
	case vmsnapshot.Failed(s):
		return nil, nil, waiting{fmt.Errorf("VMSnapshot %s failed and is invalid to use", key)}
	case !vmsnapshot.Ready(s):
		return nil, nil, waiting{fmt.Errorf("VMSnapshot %s not ready", key)}
	case s.Status.VirtualMachineSnapshotContentName == nil:
		return nil, nil, waiting{fmt.Errorf("no snapshot content name in %s", key)}
	}
	ckey := types.NamespacedName{Namespace: in.Namespace, Name: *s.Status.VirtualMachineSnapshotContentName}
	c := &snapshotv1.VirtualMachineSnapshotContent{}
	if err := r.Client.Get(ctx, ckey, c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, waiting{fmt.Errorf("VMSnapshotContent %s does not exist", ckey)}
		}
		return nil, nil, err
	}
	if !vmsnapshot.ContentReady(c) {
		return nil, nil, waiting{fmt.Errorf("VMSnapshotContent %s not ready", ckey)}
	}
	if c.Spec.Source.VirtualMachine == nil {
		return nil, nil, waiting{fmt.Errorf("unexpected snapshot source")}
	}
	return s, c, nil
}

// restore runs the restore proper once the target is stopped or absent.
func (r *Reconciler) restore(ctx context.Context, in, out *snapshotv1.VirtualMachineRestore, target *kubevirtv1.VirtualMachine, now metav1.Time) error {
	if o := out.Spec.VolumeOwnershipPolicy; o != nil && *o != snapshotv1.VolumeOwnershipPolicyVm && *o != snapshotv1.VolumeOwnershipPolicyNone {
		return r.fail(ctx, in, fmt.Sprintf("spec.volumeOwnershipPolicy: %q, want Vm or None", *o), true, now)
	}
	snap, content, err := r.snapshot(ctx, out)
	if err != nil {
		return err
	}
	restored := target != nil && target.Annotations[LastRestoreAnnotation] == LastRestoreValue(out)
	if target != nil && !restored && snap.Status.SourceUID != nil && target.UID != *snap.Status.SourceUID {
		return waiting{errors.New(ExistingTargetMessage)}
	}
	if target != nil && !restored {
		if p := target.Status.RestoreInProgress; p != nil && *p != out.Name {
			return waiting{fmt.Errorf("vm restore %s in progress", *p)}
		}
		if target.Status.RestoreInProgress == nil {
			patch := client.MergeFrom(target.DeepCopy())
			name := out.Name
			target.Status.RestoreInProgress = &name
			if err := r.Client.Status().Patch(ctx, target, patch); err != nil {
				return err
			}
		}
	}
	// The restores: one claim per volume backup.
	var restores []snapshotv1.VolumeRestore
	for _, b := range content.Spec.VolumeBackups {
		if b.VolumeSnapshotName == nil {
			return fmt.Errorf("VolumeSnapshotName missing in the backup of volume %s", b.VolumeName)
		}
		name, err := ClaimName(out, b.VolumeName)
		if err != nil {
			return r.fail(ctx, in, err.Error(), true, now)
		}
		restores = append(restores, snapshotv1.VolumeRestore{VolumeName: b.VolumeName, PersistentVolumeClaimName: name, VolumeSnapshotName: *b.VolumeSnapshotName})
	}
	if !equality.Semantic.DeepEqual(out.Status.Restores, restores) {
		out.Status.Restores = restores
		setConditions(out, corev1.ConditionTrue, "Creating new PVCs", now)
		out.Status.Conditions = vmsnapshot.SetCondition(out.Status.Conditions, vmsnapshot.Condition(snapshotv1.ConditionReady, corev1.ConditionFalse, "Waiting for new PVCs", now))
		return r.writeStatus(ctx, in, out)
	}
	waitingPVC := false
	for i, vr := range restores {
		pvc := &corev1.PersistentVolumeClaim{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: out.Namespace, Name: vr.PersistentVolumeClaimName}, pvc)
		switch {
		case apierrors.IsNotFound(err):
			if err := r.createClaim(ctx, out, content, content.Spec.VolumeBackups[i], vr.PersistentVolumeClaimName, target); err != nil {
				return err
			}
			waitingPVC = true
		case err != nil:
			return err
		case pvc.Status.Phase == corev1.ClaimPending:
			immediate, err := r.immediate(ctx, pvc)
			if err != nil {
				return err
			}
			waitingPVC = waitingPVC || immediate
		case pvc.Status.Phase != corev1.ClaimBound:
			return waiting{fmt.Errorf("PVC %s/%s in status %q", pvc.Namespace, pvc.Name, pvc.Status.Phase)}
		}
	}
	if waitingPVC {
		setConditions(out, corev1.ConditionTrue, "Creating new PVCs", now)
		out.Status.Conditions = vmsnapshot.SetCondition(out.Status.Conditions, vmsnapshot.Condition(snapshotv1.ConditionReady, corev1.ConditionFalse, "Waiting for new PVCs", now))
		return r.writeStatus(ctx, in, out)
	}
	if !restored {
		vm, err := RestoredVM(out, content.Spec.Source.VirtualMachine, target)
		if err != nil {
			return r.fail(ctx, in, err.Error(), true, now)
		}
		if target != nil {
			out.Status.DeletedDataVolumes = DeletedDataVolumes(target.Spec.DataVolumeTemplates, vm.Spec.DataVolumeTemplates)
			if err := r.Client.Update(ctx, vm); err != nil {
				return err
			}
		} else {
			if vm, err = Patch(vm, out.Spec.Patches); err != nil {
				return r.fail(ctx, in, err.Error(), true, now)
			}
			if err := r.Client.Create(ctx, vm); err != nil {
				return err
			}
			if err := r.claimOwnership(ctx, out, vm); err != nil {
				return err
			}
		}
		setConditions(out, corev1.ConditionTrue, "Updating target spec", now)
		out.Status.Conditions = vmsnapshot.SetCondition(out.Status.Conditions, vmsnapshot.Condition(snapshotv1.ConditionReady, corev1.ConditionFalse, "Waiting for target update", now))
		return r.writeStatus(ctx, in, out)
	}
	for _, dv := range out.Status.DeletedDataVolumes {
		d := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: out.Namespace, Name: dv}}
		if err := r.Client.Delete(ctx, d); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if err := r.doneRestore(ctx, out, target); err != nil {
		return err
	}
	t := true
	out.Status.Complete = &t
	out.Status.RestoreTime = &now
	out.Status.Conditions = vmsnapshot.SetCondition(out.Status.Conditions, vmsnapshot.Condition(snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Operation complete", now))
	out.Status.Conditions = vmsnapshot.SetCondition(out.Status.Conditions, vmsnapshot.Condition(snapshotv1.ConditionReady, corev1.ConditionTrue, "Operation complete", now))
	return r.writeStatus(ctx, in, out)
}

// immediate tells whether a claim's StorageClass binds Immediately (a
// pending claim of a WaitForFirstConsumer class is not waited for).
func (r *Reconciler) immediate(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	if pvc.Spec.StorageClassName == nil {
		return true, nil
	}
	sc := &storagev1.StorageClass{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: *pvc.Spec.StorageClassName}, sc); err != nil {
		if apierrors.IsNotFound(err) {
			return false, waiting{fmt.Errorf("StorageClass %s does not exist", *pvc.Spec.StorageClassName)}
		}
		return false, err
	}
	return sc.VolumeBindingMode == nil || *sc.VolumeBindingMode == storagev1.VolumeBindingImmediate, nil
}

// createClaim creates a restored claim from its VolumeSnapshot (KubeVirt's
// createRestorePVC): owned by an existing target, or marked for a new one,
// unless volumeOwnershipPolicy is None.
func (r *Reconciler) createClaim(ctx context.Context, out *snapshotv1.VirtualMachineRestore, content *snapshotv1.VirtualMachineSnapshotContent, b snapshotv1.VolumeBackup, name string, target *kubevirtv1.VirtualMachine) error {
	vs := &snapv1.VolumeSnapshot{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: out.Namespace, Name: *b.VolumeSnapshotName}, vs); err != nil {
		if apierrors.IsNotFound(err) {
			return waiting{fmt.Errorf("missing volumeSnapshot %s", *b.VolumeSnapshotName)}
		}
		return err
	}
	pvc, err := ClaimFor(out, name, b, vs, content.Spec.Source.VirtualMachine)
	if err != nil {
		return err
	}
	if out.Spec.VolumeOwnershipPolicy == nil || *out.Spec.VolumeOwnershipPolicy == snapshotv1.VolumeOwnershipPolicyVm {
		if target != nil {
			pvc.OwnerReferences = []metav1.OwnerReference{ownerRef(target)}
		} else {
			pvc.Annotations[OwnedByVMAnnotation] = out.Name
		}
	}
	return r.Client.Create(ctx, pvc)
}

// claimOwnership makes the new VM own the claims restored for it
// (KubeVirt's updateRestorePVCOwnership).
func (r *Reconciler) claimOwnership(ctx context.Context, out *snapshotv1.VirtualMachineRestore, vm *kubevirtv1.VirtualMachine) error {
	for _, vr := range out.Status.Restores {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: out.Namespace, Name: vr.PersistentVolumeClaimName}, pvc); err != nil {
			return err
		}
		if len(pvc.OwnerReferences) > 0 || pvc.Annotations[OwnedByVMAnnotation] != out.Name {
			continue
		}
		patch := client.MergeFrom(pvc.DeepCopy())
		pvc.OwnerReferences = []metav1.OwnerReference{ownerRef(vm)}
		delete(pvc.Annotations, OwnedByVMAnnotation)
		if err := r.Client.Patch(ctx, pvc, patch); err != nil {
			return err
		}
	}
	return nil
}
