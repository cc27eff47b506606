package vmrestore

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Name is the controller's name.
const Name = "vmrestore"

// Options are the controller's settings.
type Options struct {
	// SkipNameValidation lets several managers in one process register
	// the controller; for tests.
	SkipNameValidation bool
}

// SetupWithManager registers the controller with mgr: it reconciles each
// VirtualMachineRestore, and again when its target VM or VMI, its
// VirtualMachineSnapshot or a claim in its namespace changes. mgr's
// scheme must know kubevirt.io/v1, snapshot.kubevirt.io/v1beta1,
// snapshot.storage.k8s.io/v1, cdi.kubevirt.io/v1beta1 and the client-go
// types.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	c := mgr.GetClient()
	skip := o.SkipNameValidation
	return ctrl.NewControllerManagedBy(mgr).Named(Name).
		WithOptions(controller.Options{SkipNameValidation: &skip}).
		For(&snapshotv1.VirtualMachineRestore{}).
		Watches(&kubevirtv1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(restores(c, func(r *snapshotv1.VirtualMachineRestore, o client.Object) bool {
			return r.Spec.Target.Name == o.GetName()
		}))).
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(restores(c, func(r *snapshotv1.VirtualMachineRestore, o client.Object) bool {
			return r.Spec.Target.Name == o.GetName()
		}))).
		Watches(&snapshotv1.VirtualMachineSnapshot{}, handler.EnqueueRequestsFromMapFunc(restores(c, func(r *snapshotv1.VirtualMachineRestore, o client.Object) bool {
			return r.Spec.VirtualMachineSnapshotName == o.GetName()
		}))).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(restores(c, func(r *snapshotv1.VirtualMachineRestore, _ client.Object) bool {
			return progressing(r)
		}))).
		Complete(&Reconciler{Client: c})
}

// restores maps an object to the restores of its namespace that match.
func restores(c client.Client, match func(*snapshotv1.VirtualMachineRestore, client.Object) bool) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		l := &snapshotv1.VirtualMachineRestoreList{}
		if c.List(ctx, l, client.InNamespace(o.GetNamespace())) != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range l.Items {
			if match(&l.Items[i], o) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
			}
		}
		return out
	}
}
