package scheduler

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/storage/volume"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// readClaims reads, through the cache, the claims vmi's volumes use
// (ClaimNames): each PVC, the PersistentVolume it is bound to, its
// StorageClass and the DataVolume that controls it (or, while it does not
// exist, the DataVolume of a dataVolume volume). An object that does not
// exist is left nil; another error is returned, naming the object.
func (r *Reconciler) readClaims(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (Claims, error) {
	names, fromDV := ClaimNames(vmi)
	out := make(Claims, 0, len(names))
	get := func(key types.NamespacedName, obj client.Object, what string) (bool, error) {
		if err := r.Client.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, fmt.Errorf("VirtualMachineInstance %s/%s: %s %s: %w", vmi.Namespace, vmi.Name, what, key, err)
		}
		return true, nil
	}
	for _, name := range names {
		c := Claim{Name: name, FromDataVolume: fromDV[name]}
		dvName := ""
		if fromDV[name] {
			dvName = name
		}
		pvc := &corev1.PersistentVolumeClaim{}
		ok, err := get(types.NamespacedName{Namespace: vmi.Namespace, Name: name}, pvc, "PersistentVolumeClaim")
		if err != nil {
			return nil, err
		}
		if ok {
			c.PVC = pvc
			if pvc.Spec.VolumeName != "" {
				pv := &corev1.PersistentVolume{}
				if ok, err := get(types.NamespacedName{Name: pvc.Spec.VolumeName}, pv, "PersistentVolume"); err != nil {
					return nil, err
				} else if ok {
					c.PV = pv
				}
			}
			if cls := volume.GetPersistentVolumeClaimClass(pvc); cls != "" {
				sc := &storagev1.StorageClass{}
				if ok, err := get(types.NamespacedName{Name: cls}, sc, "StorageClass"); err != nil {
					return nil, err
				} else if ok {
					c.Class = sc
				}
			}
			if owner := metav1.GetControllerOf(pvc); owner != nil && owner.Kind == "DataVolume" {
				dvName = owner.Name
			}
		}
		if dvName != "" {
			dv := &cdiv1.DataVolume{}
			if ok, err := get(types.NamespacedName{Namespace: vmi.Namespace, Name: dvName}, dv, "DataVolume"); err != nil {
				return nil, err
			} else if ok {
				c.DataVolume = dv
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// setVolumeConditions sets on vmi the conditions its claims give once it
// need not wait for them: DataVolumesReady (DataVolumesReady) when it has
// dataVolume volumes, and no Synchronized=False FailedPvcNotFound.
func setVolumeConditions(vmi *kubevirtv1.VirtualMachineInstance, claims Claims) {
	if c, ok := DataVolumesReady(claims); ok {
		setVMICondition(vmi, c)
	}
	removeVMICondition(vmi, func(c kubevirtv1.VirtualMachineInstanceCondition) bool {
		return c.Type == kubevirtv1.VirtualMachineInstanceSynchronized && c.Reason == vmstate.FailedPvcNotFoundReason
	})
}

// removeVMICondition removes vmi's conditions drop says to.
func removeVMICondition(vmi *kubevirtv1.VirtualMachineInstance, drop func(kubevirtv1.VirtualMachineInstanceCondition) bool) {
	out := vmi.Status.Conditions[:0]
	for _, c := range vmi.Status.Conditions {
		if !drop(c) {
			out = append(out, c)
		}
	}
	vmi.Status.Conditions = out
}

// waitForVolumes leaves vmi Pending with w's condition and no PodScheduled
// condition (KubeVirt creates no pod yet, so none is written; one left
// from an earlier decision goes).
func (r *Reconciler) waitForVolumes(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, w *VolumeWait) error {
	if err := setNodeLabel(ctx, r.Client, vmi, ""); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	patch := client.MergeFrom(vmi.DeepCopy())
	setPhase(vmi, kubevirtv1.Pending)
	removeVMICondition(vmi, func(c kubevirtv1.VirtualMachineInstanceCondition) bool {
		return c.Type == kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled)
	})
	setVMICondition(vmi, w.Condition)
	if err := r.Client.Status().Patch(ctx, vmi, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("VirtualMachineInstance %s/%s: writing %s=%s (%s): %w", vmi.Namespace, vmi.Name, w.Condition.Type, w.Condition.Status, w.Condition.Message, err)
	}
	return nil
}

// provision is the VMI's step once node is chosen while some of its
// claims are unbound (all WaitForFirstConsumer: Claims.unboundImmediate
// refused the others): it sets AnnSelectedNode=node on the claims that
// have no selected node yet, so that their provisioner provisions them
// there, and leaves vmi Pending with PodScheduled=False, reason
// ReasonWaitingForVolumeBinding, naming the claims; the VMI is bound once
// they are (a PVC change queues it again).
func (r *Reconciler) provision(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, node string, claims Claims) error {
	for _, pvc := range claims.ToProvision() {
		patch := client.MergeFrom(pvc.DeepCopy())
		if pvc.Annotations == nil {
			pvc.Annotations = map[string]string{}
		}
		pvc.Annotations[AnnSelectedNode] = node
		if err := r.Client.Patch(ctx, pvc, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("VirtualMachineInstance %s/%s: setting %s=%s on PersistentVolumeClaim %s: %w", vmi.Namespace, vmi.Name, AnnSelectedNode, node, pvc.Name, err)
		}
	}
	if err := setNodeLabel(ctx, r.Client, vmi, ""); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	patch := client.MergeFrom(vmi.DeepCopy())
	setPhase(vmi, kubevirtv1.Pending)
	setVolumeConditions(vmi, claims)
	setVMICondition(vmi, kubevirtv1.VirtualMachineInstanceCondition{
		Type:   kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled),
		Status: corev1.ConditionFalse, Reason: ReasonWaitingForVolumeBinding,
		Message: fmt.Sprintf("waiting for PersistentVolumeClaims %s to be bound on node %s", strings.Join(claims.Unbound(), ", "), node)})
	if err := r.Client.Status().Patch(ctx, vmi, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("VirtualMachineInstance %s/%s: writing %s: %w", vmi.Namespace, vmi.Name, ReasonWaitingForVolumeBinding, err)
	}
	return nil
}
