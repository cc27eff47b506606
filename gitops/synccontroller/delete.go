package synccontroller

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// finalize carries out the deletion policy of a Sync being deleted and
// then removes the finalizer. Delete (the default) deletes every object
// of status.inventory that still carries the owner labels of the Sync's
// HyperConverged and is not annotated converge.dev/prune: disabled;
// Orphan keeps them. When the deletes fail (the target is unreachable,
// its Secret is gone, the identity is forbidden) the finalizer stays,
// Ready=False DeletionFailed says why and how to get out (set
// spec.deletionPolicy: Orphan), and the deletes are retried every
// retryInterval.
func (r *Reconciler) finalize(ctx context.Context, s *v1alpha1.Sync) (ctrl.Result, error) {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if !controllerutil.ContainsFinalizer(s, v1alpha1.Finalizer) {
		r.forget(ctx, key)
		return ctrl.Result{}, nil
	}
	if s.Spec.DeletionPolicy != v1alpha1.DeletionPolicyOrphan && s.Status.Inventory != nil && len(s.Status.Inventory.Entries) > 0 {
		st := &statusPatcher{c: r.Client, base: s.DeepCopy()}
		cs, err := r.uninstall(ctx, s)
		if err != nil {
			msg := fmt.Sprintf("%v; the finalizer %s stays until the objects are deleted: set spec.deletionPolicy: Orphan to delete the Sync and keep them",
				err, v1alpha1.Finalizer)
			markFailed(s, v1alpha1.DeletionFailedReason, false, msg)
			s.Status.ObservedGeneration = s.Generation
			r.event(s, s.Status.LastAppliedRevision, "Warning", v1alpha1.DeletionFailedReason, msg)
			log.FromContext(ctx).Error(err, "deleting the Sync's objects")
			if perr := st.patch(ctx, s); perr != nil {
				return ctrl.Result{}, perr
			}
			return ctrl.Result{RequeueAfter: r.retryInterval(s)}, nil
		}
		r.Metrics.RecordChangeSet(metricsKey(s), cs)
		r.event(s, s.Status.LastAppliedRevision, "Normal", v1alpha1.UninstalledReason,
			eventMessage("Deleted the objects of the Sync (deletionPolicy Delete)", changes(cs)))
	}
	patch := client.MergeFrom(s.DeepCopy())
	controllerutil.RemoveFinalizer(s, v1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, s, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("Sync %s: removing finalizer: %w", key, err)
	}
	r.forget(ctx, key)
	return ctrl.Result{}, nil
}

// uninstall deletes the objects of s's inventory from its target with
// reconciler.Pipeline.Uninstall (operands, then the HC, each waited for;
// then Namespaces and CRDs), as the identity s applies with, keeping in
// status.inventory what could not be deleted.
func (r *Reconciler) uninstall(ctx context.Context, s *v1alpha1.Sync) (*ssa.ChangeSet, error) {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout(s))
	defer cancel()
	t, p, err := r.targets.get(ctx, s)
	if err != nil {
		return nil, err
	}
	hc := inventoryHC(s.Status.Inventory)
	if hc.Name == "" {
		return ssa.NewChangeSet(), nil // no HC: nothing provably ours
	}
	cs, err := p.Uninstall(ctx, StatusStore{Sync: s}, p.OwnerLabels(hc.Namespace, hc.Name))
	if err != nil {
		return cs, fmt.Errorf("deleting the objects of Sync %s/%s from %s: %w", s.Namespace, s.Name, t.name, err)
	}
	return cs, nil
}
