package vmsnapshot

import (
	"context"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Name is the controller's name.
const Name = "vmsnapshot"

// Options are the controller's settings.
type Options struct {
	// SkipNameValidation lets several managers in one process register
	// the controller; for tests.
	SkipNameValidation bool
}

// SetupWithManager registers the controller with mgr: it reconciles each
// VirtualMachineSnapshot, and again when its content, one of the
// content's VolumeSnapshots, its source VM or VMI, or a claim in its
// namespace changes. mgr's scheme must know kubevirt.io/v1,
// snapshot.kubevirt.io/v1beta1, snapshot.storage.k8s.io/v1,
// cdi.kubevirt.io/v1beta1 and the client-go types.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	c := mgr.GetClient()
	skip := o.SkipNameValidation
	return ctrl.NewControllerManagedBy(mgr).Named(Name).
		WithOptions(controller.Options{SkipNameValidation: &skip}).
		For(&snapshotv1.VirtualMachineSnapshot{}).
		Watches(&snapshotv1.VirtualMachineSnapshotContent{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []reconcile.Request {
				cont := o.(*snapshotv1.VirtualMachineSnapshotContent)
				if cont.Spec.VirtualMachineSnapshotName == nil {
					return nil
				}
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: cont.Namespace, Name: *cont.Spec.VirtualMachineSnapshotName}}}
			})).
		Watches(&snapv1.VolumeSnapshot{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request {
				owner := metav1.GetControllerOf(o)
				if owner == nil || owner.Kind != "VirtualMachineSnapshotContent" {
					return nil
				}
				cont := &snapshotv1.VirtualMachineSnapshotContent{}
				if c.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: owner.Name}, cont) != nil || cont.Spec.VirtualMachineSnapshotName == nil {
					return nil
				}
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: cont.Namespace, Name: *cont.Spec.VirtualMachineSnapshotName}}}
			})).
		Watches(&kubevirtv1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(bySource(c))).
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(bySource(c))).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(inNamespace(c))).
		Complete(r)
}

// bySource maps a VM or VMI to the snapshots of the VM of its name.
func bySource(c client.Client) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		l := &snapshotv1.VirtualMachineSnapshotList{}
		if c.List(ctx, l, client.InNamespace(o.GetNamespace())) != nil {
			return nil
		}
		var out []reconcile.Request
		for _, s := range l.Items {
			if s.Spec.Source.Name == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
			}
		}
		return out
	}
}

// inNamespace maps a claim to the snapshots of its namespace still in
// progress (one waits for its claims to be bound and populated).
func inNamespace(c client.Client) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		l := &snapshotv1.VirtualMachineSnapshotList{}
		if c.List(ctx, l, client.InNamespace(o.GetNamespace())) != nil {
			return nil
		}
		var out []reconcile.Request
		for _, s := range l.Items {
			if Progressing(&s) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
			}
		}
		return out
	}
}
