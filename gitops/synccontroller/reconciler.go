package synccontroller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/metrics"
	"github.com/converge-dev/converge/gitops/source"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/graph/facts"
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

	targets *targets
	renders renders
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

// Reconcile handles one Sync: the finalizer and deletion policy, suspend,
// dependsOn, then fetch, render and apply into the target; it writes the
// status (one merge patch of what changed, plus one "Progressing" patch
// before applying a new revision or generation) and requeues after
// spec.interval plus jitter, sooner while components wait for health or
// after an error a retry may fix. Errors are reported in the status and
// events, not returned (a returned error means the status could not be
// written).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start := time.Now()
	s := &v1alpha1.Sync{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, s); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(ctx, req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("Sync %s: reading: %w", req.NamespacedName, err)
	}
	if !s.DeletionTimestamp.IsZero() {
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
	res, rerr := r.reconcile(ctx, s, st, start)
	s.Status.ObservedGeneration = s.Generation
	if v, ok := s.Annotations[v1alpha1.ReconcileRequestAnnotation]; ok {
		s.Status.LastHandledReconcileAt = v
	}
	if err := st.patch(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	for _, c := range s.Status.Conditions {
		r.Metrics.RecordCondition(key, c)
	}
	if !s.Spec.Suspend {
		r.Metrics.RecordReconcile(key, time.Since(start), rerr)
	}
	return res, nil
}

// reconcile does the work of Reconcile on s (whose status it sets) and
// returns when to come back and the reconcile's error, if any.
func (r *Reconciler) reconcile(ctx context.Context, s *v1alpha1.Sync, st *statusPatcher, start time.Time) (ctrl.Result, error) {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	mkey := metricsKey(s)
	logger := log.FromContext(ctx)
	if s.Spec.Suspend {
		status := metav1.ConditionUnknown
		if c := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
			status = c.Status
		}
		setCondition(s, v1alpha1.ReadyCondition, status, v1alpha1.SuspendedReason,
			fmt.Sprintf("Reconciliation suspended (spec.suspend); last applied revision: %q", s.Status.LastAppliedRevision))
		removeCondition(s, v1alpha1.ReconcilingCondition)
		logger.V(1).Info("suspended")
		return ctrl.Result{}, nil
	}
	if err := r.dependenciesReady(ctx, s); err != nil {
		markProgressing(s, v1alpha1.DependencyNotReadyReason, err.Error())
		logger.Info("dependencies not ready", "reason", err.Error())
		return ctrl.Result{RequeueAfter: r.Options.DependencyRequeue}, nil
	}
	timeout := DefaultTimeout
	if s.Spec.Timeout != nil && s.Spec.Timeout.Duration > 0 {
		timeout = s.Spec.Timeout.Duration
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	prevReady := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition).DeepCopy()
	prevApplied := s.Status.LastAppliedRevision
	fail := func(reason string, stalled bool, err error, lines []string) (ctrl.Result, error) {
		markFailed(s, reason, stalled, err.Error())
		if prevReady == nil || prevReady.Reason != reason || prevReady.Message != trim(err.Error()) || len(lines) > 0 {
			r.event(s, s.Status.LastAttemptedRevision, "Warning", reason, eventMessage(err.Error(), lines))
		}
		logger.Error(err, "reconcile failed", "reason", reason, "stalled", stalled)
		after := r.retryInterval(s)
		if stalled {
			after = r.interval(s)
		}
		return ctrl.Result{RequeueAfter: after}, err
	}

	t, p, err := r.targets.get(ctx, s)
	if err != nil {
		return fail(v1alpha1.TargetFailedReason, isStalledTarget(err), err, nil)
	}
	src, err := r.source(ctx, s)
	if err != nil {
		var se *sourceError
		if !errors.As(err, &se) {
			se = &sourceError{reason: v1alpha1.FetchFailedReason, err: err}
		}
		if se.reason == v1alpha1.VerificationFailedReason {
			setCondition(s, v1alpha1.SourceVerifiedCondition, metav1.ConditionFalse, se.reason, err.Error())
		}
		return fail(se.reason, se.stalled, err, nil)
	}
	fetchStart := time.Now()
	art, err := r.Fetcher.Fetch(ctx, src)
	r.Metrics.RecordFetch(mkey, time.Since(fetchStart), err)
	if err != nil {
		reason, stalled := v1alpha1.FetchFailedReason, false
		switch {
		case errors.Is(err, source.ErrVerification):
			reason, stalled = v1alpha1.VerificationFailedReason, true
			setCondition(s, v1alpha1.SourceVerifiedCondition, metav1.ConditionFalse, reason, err.Error())
		case errors.Is(err, source.ErrAuthentication):
			// Not stalled: a rotated Secret is picked up by the retry.
			reason = v1alpha1.AuthenticationFailedReason
		}
		r.reportOnHC(ctx, p, s, err)
		return fail(reason, stalled, err, nil)
	}
	s.Status.LastAttemptedRevision = art.Revision
	logger = logger.WithValues("revision", art.Revision)
	ctx = log.IntoContext(ctx, logger)
	if s.Spec.Source.Verify != nil {
		setCondition(s, v1alpha1.SourceVerifiedCondition, metav1.ConditionTrue, v1alpha1.SucceededReason,
			fmt.Sprintf("Verified %s of revision %s", art.Verified, art.Revision))
	} else {
		removeCondition(s, v1alpha1.SourceVerifiedCondition)
	}
	f, err := facts.Discover(ctx, t.cluster.GetCache(), t.cluster.GetRESTMapper())
	if err != nil {
		return fail(v1alpha1.TargetFailedReason, false, fmt.Errorf("%s: %w", t.name, err), nil)
	}
	path := s.Spec.Source.Path
	if path == "" {
		path = "."
	}
	rd, fresh, err := r.render(key, art, path, f)
	if err != nil {
		r.reportOnHC(ctx, p, s, err)
		return fail(v1alpha1.RenderFailedReason, true, err, nil)
	}
	if fresh && r.OnRender != nil {
		r.OnRender(s, rd.rendered)
	}
	if art.Revision != prevApplied || s.Generation != s.Status.ObservedGeneration {
		markProgressing(s, v1alpha1.ProgressingReason, fmt.Sprintf("Applying revision %s to %s", art.Revision, t.name))
		if err := st.patch(ctx, s); err != nil {
			logger.Error(err, "reporting progress")
		}
	}

	pp := *p
	pp.Options.Prune = s.PruneEnabled()
	if pp.Options.WaitTimeout <= 0 || pp.Options.WaitTimeout > timeout {
		pp.Options.WaitTimeout = timeout
	}
	res, err := pp.Sync(ctx, reconciler.Input{Rendered: rd.rendered, Revision: art.Revision, Inventory: StatusStore{Sync: s}})
	if r.OnSynced != nil {
		r.OnSynced(s, res, err)
	}
	var lines []string
	if res != nil {
		r.Metrics.RecordChangeSet(mkey, res.ChangeSet)
		for kind, n := range driftByKind(res) {
			r.Metrics.RecordDrift(mkey, kind, n)
		}
		lines = changes(res.ChangeSet)
		setComponents(s, res)
	}
	if err != nil {
		reason := applyReason(err)
		recordHistory(s, art.Revision, rd.digest, start, time.Since(start), reason, r.Options.HistoryLimit)
		return fail(reason, false, fmt.Errorf("revision %s into %s: %w", art.Revision, t.name, err), lines)
	}
	hc := rd.rendered.HyperConverged
	t.watch(ctx, r.ctrl, gvks(rd.rendered), types.NamespacedName{Namespace: hc.GetNamespace(), Name: hc.GetName()}, key)
	if failed := failedComponents(res); failed != "" {
		recordHistory(s, art.Revision, rd.digest, start, time.Since(start), v1alpha1.HealthCheckFailedReason, r.Options.HistoryLimit)
		return fail(v1alpha1.HealthCheckFailedReason, false, fmt.Errorf("revision %s in %s: %s", art.Revision, t.name, failed), lines)
	}
	if res.Waiting || !allHealthy(res) {
		msg := fmt.Sprintf("Revision %s: waiting for health: %s", art.Revision, waitingMessage(res))
		markProgressing(s, v1alpha1.WaitingForHealthReason, msg)
		recordHistory(s, art.Revision, rd.digest, start, time.Since(start), v1alpha1.WaitingForHealthReason, r.Options.HistoryLimit)
		if len(lines) > 0 {
			r.event(s, art.Revision, "Normal", v1alpha1.ProgressingReason, eventMessage(msg, lines))
		}
		logger.Info("waiting for health", "changes", lines, "message", msg)
		after := r.Options.HealthRequeue
		if res.RequeueAfter > 0 && res.RequeueAfter < after {
			after = res.RequeueAfter
		}
		return ctrl.Result{RequeueAfter: after}, nil
	}
	s.Status.LastAppliedRevision = art.Revision
	markReady(s, "Applied revision: "+art.Revision)
	recordHistory(s, art.Revision, rd.digest, start, time.Since(start), v1alpha1.SucceededReason, r.Options.HistoryLimit)
	r.Metrics.RecordRevision(mkey, art.Revision)
	nDrift := len(res.Drifted)
	switch {
	case art.Revision == prevApplied && nDrift > 0:
		r.event(s, art.Revision, "Normal", v1alpha1.DriftCorrectedReason, eventMessage(
			fmt.Sprintf("Revision %s: corrected drift of %d object(s)", art.Revision, nDrift), lines))
	case art.Revision != prevApplied || len(lines) > 0 || prevReady == nil || prevReady.Status != metav1.ConditionTrue:
		r.event(s, art.Revision, "Normal", v1alpha1.SucceededReason, eventMessage("Applied revision "+art.Revision, lines))
	}
	// Each changed object by identity and action, as Flux logs its change
	// set; drifted lists the inventory IDs whose drift was reverted.
	logger.Info("reconciled", "changes", lines, "drifted", res.Drifted, "writes", res.Writes, "duration", time.Since(start).Round(time.Millisecond))
	return ctrl.Result{RequeueAfter: r.interval(s)}, nil
}

// applyReason classifies a Pipeline.Sync error as a Ready reason: the
// phase of a *reconciler.StageError (HealthCheckFailed for a stage whose
// objects did not become ready, PruneFailed for a failed prune),
// ApplyFailed for anything else.
func applyReason(err error) string {
	var se *reconciler.StageError
	if errors.As(err, &se) {
		switch se.Phase {
		case reconciler.PhaseHealth:
			return v1alpha1.HealthCheckFailedReason
		case reconciler.PhasePrune:
			return v1alpha1.PruneFailedReason
		}
	}
	return v1alpha1.ApplyFailedReason
}

// reportOnHC reports a fetch or render error on the HC the Sync applied
// last (HCO's ReconcileComplete=False), as the single-source controller
// did; it does nothing when the Sync has applied no HC yet.
func (r *Reconciler) reportOnHC(ctx context.Context, p *reconciler.Pipeline, s *v1alpha1.Sync, err error) {
	hc := inventoryHC(s.Status.Inventory)
	if p == nil || hc.Name == "" {
		return
	}
	if _, serr := p.Sync(ctx, reconciler.Input{Err: err, HC: hc, Revision: s.Status.LastAttemptedRevision}); serr != nil && !errors.Is(serr, err) {
		log.FromContext(ctx).Error(serr, "reporting on the HyperConverged", "hyperconverged", hc)
	}
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
	d := s.Spec.Interval.Duration
	if d <= 0 {
		d = DefaultInterval
	}
	return d + time.Duration(rand.Float64()*r.Options.Jitter*float64(d))
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
