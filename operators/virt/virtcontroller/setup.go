package virtcontroller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/crdwait"
)

// CRDNames are the CRDs the controllers watch; Setup waits for them.
var CRDNames = []string{"virtualmachines.kubevirt.io", "virtualmachineinstances.kubevirt.io"}

// Setup registers the "virtualmachine", "vmi-scheduler" and
// "vmi-node-health" controllers
// with mgr once the VirtualMachine and VirtualMachineInstance CRDs are
// established (converge installs them in the graph's "crds" stage, so
// they may appear after converge-controller starts); until then it polls
// every opts.CRDPoll. mgr's scheme must know kubevirt.io/v1 and the
// client-go types.
func Setup(mgr ctrl.Manager, opts Options) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		log := ctrl.Log.WithName("virtctl")
		if !crdwait.Wait(ctx, mgr.GetAPIReader(), opts.CRDPoll, CRDNames...) {
			return nil
		}
		log.Info("VirtualMachine CRDs established; starting the VM controller and scheduler")
		if err := register(mgr, opts); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}))
}

// register builds both controllers (also after mgr started: they start
// at once).
func register(mgr ctrl.Manager, opts Options) error {
	vmr := &VMReconciler{Client: mgr.GetClient()}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachine").
		For(&kubevirtv1.VirtualMachine{}).
		Owns(&kubevirtv1.VirtualMachineInstance{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.Concurrency, 1), SkipNameValidation: &opts.SkipNameValidation}).
		Complete(vmr); err != nil {
		return fmt.Errorf("virtctl: building the virtualmachine controller: %w", err)
	}
	sr := &SchedulerReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Options: opts}
	pending := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return pendingRequests(ctx, mgr.GetClient())
	})
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("vmi-scheduler").
		For(&kubevirtv1.VirtualMachineInstance{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			v, ok := o.(*kubevirtv1.VirtualMachineInstance)
			return ok && (Pending(v) || (v.Status.NodeName != "" && StaleNodeLabel(v)))
		}))).
		// Capacity changes: nodes, and VMIs that ended or left.
		Watches(&corev1.Node{}, pending).
		Watches(&kubevirtv1.VirtualMachineInstance{}, pending, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return true },
			UpdateFunc: func(e event.UpdateEvent) bool {
				v, ok := e.ObjectNew.(*kubevirtv1.VirtualMachineInstance)
				return ok && (v.DeletionTimestamp != nil || Final(v.Status.Phase))
			},
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: &opts.SkipNameValidation}).
		Complete(sr); err != nil {
		return fmt.Errorf("virtctl: building the vmi-scheduler controller: %w", err)
	}
	nr := &NodeHealthReconciler{Client: mgr.GetClient(), HeartbeatTimeout: opts.HeartbeatTimeout,
		Events: mgr.GetEventRecorderFor("virt-controller")} //nolint:staticcheck // core/v1 Events, as KubeVirt's
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("vmi-node-health").
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[v1alpha1.AgentLabel] == "true"
		}))).
		// VMIs name their node: a VMI placed on a node that is gone.
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if n := o.GetLabels()[kubevirtv1.NodeNameLabel]; n != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: n}}}
			}
			return nil
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: &opts.SkipNameValidation}).
		Complete(nr); err != nil {
		return fmt.Errorf("virtctl: building the vmi-node-health controller: %w", err)
	}
	return nil
}

// pendingRequests lists the pending VMIs (from the cache).
func pendingRequests(ctx context.Context, c client.Client) []reconcile.Request {
	list := &kubevirtv1.VirtualMachineInstanceList{}
	if err := c.List(ctx, list); err != nil {
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
