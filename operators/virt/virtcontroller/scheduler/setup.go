package scheduler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// ControllerName is the VMI scheduler's name in the manager, its logs and
// metrics.
const ControllerName = "vmi-scheduler"

// Options are the VMI scheduler's settings.
type Options struct {
	// UnschedulableRetry is how often an unschedulable VMI is tried again
	// besides on node and placement changes.
	UnschedulableRetry time.Duration
	// SkipNameValidation lets several managers in one process register
	// the controller (controller-runtime requires unique controller names
	// per process); for tests.
	SkipNameValidation bool
	// Ratios, when set, gives the ratios of the VMIs' requests (the native
	// KubeVirt CR's developerConfiguration), read at each decision; nil
	// means DefaultRatios.
	Ratios func() Ratios
}

// ratios gives o.Ratios(), or DefaultRatios.
func (o Options) ratios() Ratios {
	if o.Ratios == nil {
		return DefaultRatios()
	}
	return o.Ratios()
}

// DefaultOptions gives UnschedulableRetry 30 s.
func DefaultOptions() Options {
	return Options{UnschedulableRetry: 30 * time.Second}
}

// SetupWithManager takes a manager whose scheme knows kubevirt.io/v1,
// cdi.kubevirt.io/v1beta1 and the client-go types and registers the
// ControllerName controller with it
// (also after the manager started: it starts at once): a Reconciler on the
// manager's client (NetworkAttachmentDefinitions through its API reader)
// for each VMI that is Pending or whose NodeNameLabel is stale, and for
// every pending VMI again when a Node changes what a decision reads of it
// (nodeChanges), a VMI ends or is deleted
// (capacity freed), or a PVC, PersistentVolume, StorageClass or
// DataVolume changes (volumes appearing, populated or bound). It decides one VMI at a time. The error names the
// controller that could not be built.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Options: opts}
	pending := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return pendingRequests(ctx, mgr.GetClient())
	})
	if err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&kubevirtv1.VirtualMachineInstance{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			v, ok := o.(*kubevirtv1.VirtualMachineInstance)
			return ok && (Pending(v) || (v.Status.NodeName != "" && StaleNodeLabel(v)))
		}))).
		// Capacity changes: nodes, and VMIs that ended or left.
		Watches(&corev1.Node{}, pending, builder.WithPredicates(nodeChanges)).
		// Volumes: claims appearing, populated or bound.
		Watches(&corev1.PersistentVolumeClaim{}, pending).
		Watches(&corev1.PersistentVolume{}, pending).
		Watches(&storagev1.StorageClass{}, pending).
		Watches(&cdiv1.DataVolume{}, pending).
		Watches(&kubevirtv1.VirtualMachineInstance{}, pending, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return true },
			UpdateFunc: func(e event.UpdateEvent) bool {
				v, ok := e.ObjectNew.(*kubevirtv1.VirtualMachineInstance)
				return ok && (v.DeletionTimestamp != nil || vmstate.Final(v.Status.Phase))
			},
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: &opts.SkipNameValidation}).
		Complete(r); err != nil {
		return fmt.Errorf("building the %s controller: %w", ControllerName, err)
	}
	return nil
}

// pendingRequests lists the pending VMIs (from the cache, its own
// objects: read only).
func pendingRequests(ctx context.Context, c client.Client) []reconcile.Request {
	list := &kubevirtv1.VirtualMachineInstanceList{}
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if Pending(&list.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}
