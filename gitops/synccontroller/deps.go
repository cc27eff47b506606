package synccontroller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// dependenciesReady returns nil when every Sync of spec.dependsOn exists,
// has reconciled its generation, is Ready=True and applied the revision
// it last attempted (as Flux's kustomize-controller checkDependencies);
// else an error naming the first one that is not.
func (r *Reconciler) dependenciesReady(ctx context.Context, s *v1alpha1.Sync) error {
	for _, d := range s.Spec.DependsOn {
		key := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
		if key.Namespace == "" {
			key.Namespace = s.Namespace
		}
		dep := &v1alpha1.Sync{}
		if err := r.Client.Get(ctx, key, dep); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("dependency Sync %s not found", key)
			}
			return fmt.Errorf("dependency Sync %s: %w", key, err)
		}
		if dep.Generation != dep.Status.ObservedGeneration {
			return fmt.Errorf("dependency Sync %s is not ready: generation %d not reconciled yet", key, dep.Generation)
		}
		if !apimeta.IsStatusConditionTrue(dep.Status.Conditions, v1alpha1.ReadyCondition) {
			return fmt.Errorf("dependency Sync %s is not ready", key)
		}
		if dep.Status.LastAppliedRevision != dep.Status.LastAttemptedRevision {
			return fmt.Errorf("dependency Sync %s is not ready: revision %s not applied (last applied %s)",
				key, dep.Status.LastAttemptedRevision, dep.Status.LastAppliedRevision)
		}
	}
	return nil
}

// dependants maps a Sync to the Syncs that depend on it, so they are
// reconciled as soon as it becomes ready rather than at their next
// dependency requeue.
func (r *Reconciler) dependants(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1alpha1.SyncList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, s := range list.Items {
		for _, d := range s.Spec.DependsOn {
			ns := d.Namespace
			if ns == "" {
				ns = s.Namespace
			}
			if d.Name == o.GetName() && ns == o.GetNamespace() {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
				break
			}
		}
	}
	return out
}

// readyChanged passes Sync updates that change Ready's status or the last
// applied revision.
var readyChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.Sync)
		n, ok2 := e.ObjectNew.(*v1alpha1.Sync)
		if !ok1 || !ok2 {
			return false
		}
		return readyStatus(o) != readyStatus(n) || o.Status.LastAppliedRevision != n.Status.LastAppliedRevision
	},
}

func readyStatus(s *v1alpha1.Sync) metav1.ConditionStatus {
	if c := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}

// requestChanged passes Sync updates that set the deletion timestamp or
// change the reconcile request annotation.
var requestChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() {
			return true
		}
		return e.ObjectOld.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation] !=
			e.ObjectNew.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation]
	},
}
