package synccontroller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/metrics"
	"github.com/converge-dev/converge/gitops/receiver"
	"github.com/converge-dev/converge/gitops/source"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/reconciler"
)

// Defaults of the CRD, used when a Sync was created without them (the
// API server applies the CRD's defaults, so only Go-built objects miss
// them).
const (
	DefaultInterval = 5 * time.Minute
	DefaultTimeout  = 5 * time.Minute
)

// EventRevisionAnnotation carries the revision on the Kubernetes events
// of a reconcile (as Flux's revision event metadata).
const EventRevisionAnnotation = "converge.dev/revision"

// Reconciler reconciles converge.dev/v1alpha1 Syncs: one per Sync, fetch,
// render, apply into the target, status, events and metrics. Create it
// with its exported fields set and call SetupWithManager.
type Reconciler struct {
	// Client reads Syncs from the manager's cache (dependsOn) and patches
	// them; nil uses the manager's.
	Client client.Client
	// APIReader reads the Sync at the start of each reconcile and every
	// Secret, uncached; nil uses the manager's API reader.
	APIReader client.Reader
	// Config is the local target's rest.Config (Syncs without
	// spec.target); nil uses the manager's.
	Config *rest.Config
	// Engine renders the graph. Required.
	Engine *graph.Engine
	// Fetcher fetches the repositories. Required.
	Fetcher *source.Fetcher
	// Events receives one core/v1 Event per reconcile that changed
	// something or failed differently; nil uses
	// mgr.GetEventRecorderFor("converge-controller").
	Events record.EventRecorder
	// Metrics records the Prometheus metrics; nil records none.
	Metrics *metrics.Recorder
	// Options tunes the controller; the zero value means DefaultOptions().
	Options Options
	// OnRender, if set, is called with every new render (a new revision or
	// new facts) before it is applied (main uses it for the hco-webhook's
	// certificate lifetimes).
	OnRender func(*v1alpha1.Sync, *graph.Rendered)
	// OnSynced, if set, is called after every Pipeline.Sync (main re-injects
	// the webhook caBundle; tests observe results).
	OnSynced func(*v1alpha1.Sync, *reconciler.Result, error)
	// Gate, if set, is waited on at the start of every reconcile (it may
	// block); its error ends the reconcile, which is retried. main holds
	// reconciles until the hco-webhook's Service can be reached.
	Gate func(ctx context.Context) error
	// Receivers, if set, is the push receiver's index: every reconcile of
	// a Sync with spec.receiver reads its Secret and indexes its hook
	// path and token, and publishes the path in status.webhookPath; a Sync
	// deleted or without spec.receiver leaves it. Nil (no receiver
	// served) publishes no path.
	Receivers *receiver.Index

	targets *targets
	// renders is each Sync's last rendering (render); settled its last
	// complete apply (refreshStage); wakes says why each was enqueued.
	renders perSync[rendering]
	settled perSync[settledSync]
	wakes   *wakes
	ctrl    controller.Controller
	trigger chan event.GenericEvent
}

// statusPatcher patches a Sync's status subresource with a JSON merge
// patch of what changed since the last patch, and sends nothing when
// nothing changed.
type statusPatcher struct {
	c    client.Client
	base *v1alpha1.Sync
}

func (p *statusPatcher) patch(ctx context.Context, s *v1alpha1.Sync) error {
	patch := client.MergeFrom(p.base)
	data, err := patch.Data(s)
	if err != nil {
		return err
	}
	if string(data) == "{}" {
		return nil
	}
	if err := p.c.Status().Patch(ctx, s, patch); err != nil {
		return fmt.Errorf("Sync %s/%s: patching status: %w", s.Namespace, s.Name, err)
	}
	p.base = s.DeepCopy()
	return nil
}

func metricsKey(s *v1alpha1.Sync) metrics.SyncKey {
	return metrics.SyncKey{Namespace: s.Namespace, Name: s.Name}
}

// Reconcile handles one Sync: the finalizer and deletion policy, then the
// stages (reconcile: suspend, dependsOn, fetch → render → apply into the
// target) and the report of their outcome (report); it writes the status
// (one merge patch of what changed, plus one "Progressing" patch while
// rendering a new revision or generation, done before the apply) and requeues after
// spec.interval plus jitter, sooner while components wait for health or
// after an error a retry may fix. Errors are reported in the status and
// events, not returned (a returned error means the status could not be
// written).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.Gate != nil {
		if err := r.Gate(ctx); err != nil {
			return ctrl.Result{}, fmt.Errorf("Sync %s: %w", req.NamespacedName, err)
		}
	}
	start := time.Now()
	statusOnly := r.wakes != nil && r.wakes.take(req.NamespacedName)
	s := &v1alpha1.Sync{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, s); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(ctx, req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("Sync %s: reading: %w", req.NamespacedName, err)
	}
	if !s.DeletionTimestamp.IsZero() {
		r.forgetReceiver(req.NamespacedName)
		return r.finalize(ctx, s)
	}
	if !controllerutil.ContainsFinalizer(s, v1alpha1.Finalizer) {
		patch := client.MergeFrom(s.DeepCopy())
		controllerutil.AddFinalizer(s, v1alpha1.Finalizer)
		if err := r.Client.Patch(ctx, s, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("Sync %s: adding finalizer %s: %w", req.NamespacedName, v1alpha1.Finalizer, err)
		}
	}
	key := metricsKey(s)
	r.Metrics.RecordSuspend(key, s.Spec.Suspend)
	st := &statusPatcher{c: r.Client, base: s.DeepCopy()}
	r.updateReceiver(ctx, s)                          // status.webhookPath and the receiver's index
	out := r.reconcile(ctx, s, st, start, statusOnly) // suspend, dependsOn, refresh or fetch → render → apply
	res, rerr := r.report(ctx, s, out)                // conditions, history, events, metrics, log
	s.Status.ObservedGeneration = s.Generation
	if v, ok := s.Annotations[v1alpha1.ReconcileRequestAnnotation]; ok {
		s.Status.LastHandledReconcileAt = v
	}
	if err := st.patch(ctx, s); err != nil {
		if r.targets != nil {
			r.targets.unsettle(req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	for _, c := range s.Status.Conditions {
		r.Metrics.RecordCondition(key, c)
	}
	switch {
	case out.refreshed:
		r.Metrics.RecordRefresh(key, time.Since(start), rerr)
	case !s.Spec.Suspend:
		r.Metrics.RecordReconcile(key, time.Since(start), rerr)
	}
	return res, nil
}

// event records a Kubernetes event on s with the revision annotation.
func (r *Reconciler) event(s *v1alpha1.Sync, revision, typ, reason, msg string) {
	if r.Events == nil {
		return
	}
	var ann map[string]string
	if revision != "" {
		ann = map[string]string{EventRevisionAnnotation: revision}
	}
	r.Events.AnnotatedEventf(s, ann, typ, reason, "%s", trim(msg))
}

// interval is spec.interval plus up to Options.Jitter of it.
func (r *Reconciler) interval(s *v1alpha1.Sync) time.Duration {
	d := specInterval(s)
	return d + time.Duration(rand.Float64()*r.Options.Jitter*float64(d))
}

// specInterval is s's spec.interval, else DefaultInterval.
func specInterval(s *v1alpha1.Sync) time.Duration {
	if d := s.Spec.Interval.Duration; d > 0 {
		return d
	}
	return DefaultInterval
}

// retryInterval is s's spec.retryInterval, else Options.RetryInterval.
func (r *Reconciler) retryInterval(s *v1alpha1.Sync) time.Duration {
	if s.Spec.RetryInterval != nil && s.Spec.RetryInterval.Duration > 0 {
		return s.Spec.RetryInterval.Duration
	}
	return r.Options.RetryInterval
}

// forget drops what the controller keeps about a Sync that is gone,
// stopping the cache of a remote target no other Sync uses.
func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) {
	r.renders.forget(key)
	r.settled.forget(key)
	r.forgetReceiver(key)
	if r.targets != nil {
		r.targets.forget(ctx, key)
	}
	r.Metrics.Delete(metrics.SyncKey{Namespace: key.Namespace, Name: key.Name})
}

// Targets lists, sorted, the names of the target clusters whose caches
// run: "the local cluster" once a Sync without spec.target was
// reconciled, and `kubeconfig Secret <namespace>/<name> key "<key>"` per
// kubeconfig some Sync uses. A remote target is stopped and dropped when
// its last Sync is deleted or moves to another target. Nil before
// SetupWithManager.
func (r *Reconciler) Targets() []string {
	if r.targets == nil {
		return nil
	}
	return r.targets.names()
}

// gvks returns the distinct GroupVersionKinds of r's objects.
func gvks(r *graph.Rendered) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, o := range r.Objects() {
		if g := o.GroupVersionKind(); !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out
}
