package synccontroller

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// EventSource is the component name of the controller's events.
const EventSource = "converge-controller"

// SetupWithManager fills the unset fields from mgr and registers the
// controller "sync": Syncs are reconciled when created, when their
// generation changes (spec), when the reconcile request annotation
// changes, when they are being deleted, when a Sync they depend on
// becomes ready, on Trigger, when a Secret they read changes, and on any
// change to an object they applied (drift). mgr's scheme must know v1alpha1. The targets' caches stop
// with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Config == nil {
		r.Config = mgr.GetConfig()
	}
	if r.Events == nil {
		r.Events = mgr.GetEventRecorderFor(EventSource) //nolint:staticcheck // core/v1 Events, which kubectl describe shows
	}
	if r.Options.Concurrency == 0 {
		r.Options = DefaultOptions()
	}
	r.wakes = newWakes()
	r.targets = newTargets(r.Config, r.APIReader, r.Options.Pipeline, r.Options.Lockdown, r.wakes)
	r.trigger = make(chan event.GenericEvent, 64)
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("sync").
		For(&v1alpha1.Sync{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, requestChanged))).
		Watches(&v1alpha1.Sync{}, handler.EnqueueRequestsFromMapFunc(r.marked(r.dependants)), builder.WithPredicates(readyChanged)).
		WatchesRawSource(source.Channel(r.trigger, &handler.EnqueueRequestForObject{})).
		// Metadata only: the controller never caches Secret data.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.marked(r.secretUsers)),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Concurrency}).
		Build(r)
	if err != nil {
		return err
	}
	r.ctrl = c
	r.targets.ctrl = c
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		r.targets.stopAll()
		return nil
	}))
}

// Trigger asks for a reconcile of the Sync key now (the receiver calls it
// after an authenticated push). It never blocks: with 64 triggers already
// queued it drops this one (the queued ones reconcile the same state).
func (r *Reconciler) Trigger(key types.NamespacedName) {
	r.wake(key, false)
}

// wake enqueues the Sync key through the trigger channel, marked with
// why (wakes): a status-only change or anything else.
func (r *Reconciler) wake(key types.NamespacedName, statusOnly bool) {
	if r.wakes != nil {
		r.wakes.mark(key, statusOnly)
	}
	s := &v1alpha1.Sync{}
	s.Namespace, s.Name = key.Namespace, key.Name
	select {
	case r.trigger <- event.GenericEvent{Object: s}:
	default:
	}
}

// marked wraps a map function so that every Sync it enqueues is marked
// as woken for something other than a status-only change (wakes).
func (r *Reconciler) marked(f handler.MapFunc) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		reqs := f(ctx, o)
		for _, q := range reqs {
			r.wakes.mark(q.NamespacedName, false)
		}
		return reqs
	}
}
