package synccontroller

import (
	"context"
	"errors"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/source"
	"github.com/converge-dev/converge/internal/graph/facts"
	"github.com/converge-dev/converge/reconciler"
)

// outcome is what the stages of one reconcile of a Sync came to: the one
// input of report, which writes the status, events, metrics and log line
// from it.
type outcome struct {
	// start is when the reconcile began (status.history, the log line).
	start time.Time
	// prevReady and prevApplied are the Ready condition and
	// status.lastAppliedRevision before the reconcile: events are
	// emitted only for what changed since.
	prevReady   *metav1.Condition
	prevApplied string

	// suspended: spec.suspend is set; no stage ran.
	suspended bool
	// dependency says which Sync of spec.dependsOn is not ready; no stage
	// ran.
	dependency error

	// fetch is the call of Fetcher.Fetch (its metric); nil when the fetch
	// stage failed before it.
	fetch *fetchCall
	// artifact is the fetched revision; nil when the fetch stage failed.
	artifact *source.Artifact
	// target names the target cluster in messages; set once fetched.
	target string
	// digest is "sha256:<hex>" of the rendered objects (status.history);
	// set once rendered.
	digest string
	// synced: Pipeline.Sync ran, so the revision goes into status.history.
	synced bool
	// refreshed: no stage ran; the status of the last complete apply was
	// refreshed instead (refreshStage). Not in status.history.
	refreshed bool
	// result is what Pipeline.Sync did (change set, component health,
	// drift, writes); nil when it did not run or failed before applying.
	result *reconciler.Result
	// failure is the stage failure that ended the reconcile; nil when
	// every stage succeeded.
	failure *failure
}

// fetchCall is one call of Fetcher.Fetch: how long it took and its error.
type fetchCall struct {
	took time.Duration
	err  error
}

// failure is a failed stage, classified: the Ready reason, whether the
// Sync is stalled (no retry helps until the Sync, its Secrets or the
// repository change) and the error, which is the condition's message.
type failure struct {
	reason  string
	stalled bool
	err     error
	// onHC: the failure is also reported on the HyperConverged the Sync
	// applied last (a failed fetch or render; see reportOnHC).
	onHC bool
	// applied: every stage was applied; only health failed (a component
	// Failed with spec.wait).
	applied bool
}

// fetched is the result of the fetch stage: the target, its Pipeline
// and the fetched revision.
type fetched struct {
	target   *target
	pipeline *reconciler.Pipeline
	artifact source.Artifact
	call     *fetchCall
}

// reconcile runs the stages of one reconcile of s and collects what they
// came to: the early outcomes (suspended, a dependency not ready), then,
// when only status-only changes asked for it (statusOnly) and
// refreshStage accepts, a status refresh, else fetch → render → apply,
// each returning its value, under spec.timeout.
// The only status it writes is the "Progressing" patch of a new revision
// or generation, sent while it renders (reportProgress); a failed fetch
// or render is also reported on the HyperConverged the Sync applied last
// (reportOnHC). Everything else is report's.
func (r *Reconciler) reconcile(ctx context.Context, s *v1alpha1.Sync, st *statusPatcher, start time.Time, statusOnly bool) outcome {
	out := outcome{start: start, prevApplied: s.Status.LastAppliedRevision,
		prevReady: apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition).DeepCopy()}
	if s.Spec.Suspend {
		out.suspended = true
		return out
	}
	if err := r.Options.Lockdown.denied(s); err != nil {
		out.failure = &failure{reason: v1alpha1.AccessDeniedReason, stalled: true, err: err}
		return out
	}
	if out.dependency = r.dependenciesReady(ctx, s); out.dependency != nil {
		return out
	}
	timeout := syncTimeout(s)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if statusOnly {
		if refreshed, ok := r.refreshStage(ctx, s, out); ok {
			return refreshed
		}
	}

	f, fail := r.fetchStage(ctx, s)
	out.fetch = f.call
	if fail != nil {
		return r.failed(ctx, s, f.pipeline, out, fail)
	}
	out.artifact, out.target = &f.artifact, f.target.name
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("revision", f.artifact.Revision))

	progressed := r.reportProgress(ctx, s, st, out) // beside the render
	rd, fail := r.renderStage(ctx, s, f.target, f.artifact)
	progressed()
	if fail != nil {
		return r.failed(ctx, s, f.pipeline, out, fail)
	}
	out.digest = rd.digest

	out.result, out.failure = r.applyStage(ctx, s, st, f, rd, timeout)
	out.synced = true
	r.settle(s, f, rd, out)
	return out
}

// failed ends the stages with fail, reporting it on the HyperConverged
// first when it says so (onHC), with the revision last attempted.
func (r *Reconciler) failed(ctx context.Context, s *v1alpha1.Sync, p *reconciler.Pipeline, out outcome, fail *failure) outcome {
	r.settled.forget(client.ObjectKeyFromObject(s))
	if fail.onHC {
		revision := s.Status.LastAttemptedRevision
		if out.artifact != nil {
			revision = out.artifact.Revision
		}
		r.reportOnHC(ctx, p, s, revision, fail.err)
	}
	out.failure = fail
	return out
}

// fetchStage gets s's target and its Pipeline, builds the source from the
// spec and its Secrets, and fetches it. A failure is classified:
// TargetFailed (stalled when the kubeconfig Secret is missing or
// malformed), FetchFailed, AuthenticationFailed, VerificationFailed
// (stalled), as the source's Secrets or the fetch say (sourceError,
// source.ErrAuthentication, source.ErrVerification). The fetched value
// holds what the stage got before a failure.
func (r *Reconciler) fetchStage(ctx context.Context, s *v1alpha1.Sync) (fetched, *failure) {
	var f fetched
	var err error
	if f.target, f.pipeline, err = r.targets.get(ctx, s); err != nil {
		return f, &failure{reason: v1alpha1.TargetFailedReason, stalled: isStalledTarget(err), err: err}
	}
	src, err := r.source(ctx, s)
	if err != nil {
		var se *sourceError
		if !errors.As(err, &se) {
			se = &sourceError{reason: v1alpha1.FetchFailedReason, err: err}
		}
		return f, &failure{reason: se.reason, stalled: se.stalled, err: err}
	}
	begin := time.Now()
	f.artifact, err = r.Fetcher.Fetch(ctx, src)
	f.call = &fetchCall{took: time.Since(begin), err: err}
	if err != nil {
		fail := &failure{reason: v1alpha1.FetchFailedReason, err: err, onHC: true}
		switch {
		case errors.Is(err, source.ErrVerification):
			fail.reason, fail.stalled = v1alpha1.VerificationFailedReason, true
		case errors.Is(err, source.ErrAuthentication):
			// Not stalled: a rotated Secret is picked up by the retry.
			fail.reason = v1alpha1.AuthenticationFailedReason
		}
		return f, fail
	}
	return f, nil
}

// renderStage discovers the target's facts and renders spec.source.path
// of art with them (the last rendering reused while nothing it depends on
// changed), calling OnRender with a new one. A failure is TargetFailed
// (facts) or RenderFailed (stalled: the config must change).
func (r *Reconciler) renderStage(ctx context.Context, s *v1alpha1.Sync, t *target, art source.Artifact) (rendering, *failure) {
	f, err := facts.Discover(ctx, t.cluster.GetCache(), t.cluster.GetRESTMapper())
	if err != nil {
		return rendering{}, &failure{reason: v1alpha1.TargetFailedReason, err: fmt.Errorf("%s: %w", t.name, err)}
	}
	path := s.Spec.Source.Path
	if path == "" {
		path = "."
	}
	rd, fresh, err := r.render(ctx, client.ObjectKeyFromObject(s), art, path, f, s.Spec.Operators)
	if err != nil {
		return rendering{}, &failure{reason: v1alpha1.RenderFailedReason, stalled: true, err: err, onHC: true}
	}
	if fresh && r.OnRender != nil {
		r.OnRender(s, rd.rendered)
	}
	return rd, nil
}

// reportProgress marks s, before a new revision or generation is
// rendered and applied, so that a long apply shows: the fetched revision
// (recordSource) and Reconciling/Ready Progressing "Applying revision
// <revision> to <target>". It patches that status from a copy of s in
// the background, so the API server's write overlaps the render (CPU
// bound); the returned func waits for the patch, then takes the object
// the API server answered into s (its resourceVersion included, which the
// next merge patch would otherwise send back stale and be refused), and
// must be called before s is read or written again by anything but the
// render. A failed patch is logged; the final patch carries the status
// anyway. A render that then fails turns the status Stalled RenderFailed
// in that final patch.
func (r *Reconciler) reportProgress(ctx context.Context, s *v1alpha1.Sync, st *statusPatcher, out outcome) (wait func()) {
	if out.artifact.Revision == out.prevApplied && s.Generation == s.Status.ObservedGeneration {
		return func() {}
	}
	recordSource(s, out.artifact)
	markProgressing(s, v1alpha1.ProgressingReason, fmt.Sprintf("Applying revision %s to %s", out.artifact.Revision, out.target))
	// The patch decodes the server's answer into its object: a copy, as
	// the render reads s meanwhile.
	progressing := s.DeepCopy()
	done := make(chan error, 1)
	go func() { done <- st.patch(ctx, progressing) }()
	return func() {
		if err := <-done; err != nil {
			log.FromContext(ctx).Error(err, "reporting progress")
			return
		}
		progressing.DeepCopyInto(s)
	}
}

// applyStage applies the rendering with the target's Pipeline (prune per
// spec.prune, health gates and waits per spec.wait, health waits bounded
// by timeout, the inventory in the Sync's status through StatusStore, the
// record of the objects about to be created written at once through st,
// the live state read uncached after a failed apply: see unsettled)
// and calls OnSynced. After a successful apply the target watches the applied
// kinds for the Sync, and, with spec.wait, a Failed component is a
// failure (HealthCheckFailed); a failed Pipeline.Sync is classified by
// applyReason. The result is returned with either.
func (r *Reconciler) applyStage(ctx context.Context, s *v1alpha1.Sync, st *statusPatcher, f fetched, rd rendering, timeout time.Duration) (*reconciler.Result, *failure) {
	pp := forSync(f.pipeline, s, timeout)
	revision := f.artifact.Revision
	store := StatusStore{Sync: s, Write: func(ctx context.Context) error { return st.patch(ctx, s) }}
	key := client.ObjectKeyFromObject(s)
	f.target.own.begin(key)
	pp.Options.Wrote = func(id, version string) { f.target.own.wrote(key, id, version) }
	in := reconciler.Input{Rendered: rd.rendered, Revision: revision, Inventory: store}
	if f.target.unsettled.is(key) {
		in.LiveReader = f.target.cluster.GetAPIReader()
	}
	res, err := pp.Sync(ctx, in)
	f.target.unsettled.applied(key, err != nil)
	var saved *v1alpha1.Inventory
	if res != nil {
		saved = res.Inventory
	}
	if foreign, statusOnly := f.target.own.end(key, saved); foreign {
		r.wake(key, statusOnly) // someone else changed an applied object meanwhile
	}
	if r.OnSynced != nil {
		r.OnSynced(s, res, err)
	}
	if err != nil {
		return res, &failure{reason: applyReason(err), err: fmt.Errorf("revision %s into %s: %w", revision, f.target.name, err)}
	}
	hc := rd.rendered.HyperConverged
	f.target.watch(ctx, r.ctrl, gvks(rd.rendered), types.NamespacedName{Namespace: hc.GetNamespace(), Name: hc.GetName()}, key)
	return res, healthFailure(s, res, revision, f.target.name)
}

// forSync gives a copy of p set for s: prune per spec.prune, health
// gates and waits only with spec.wait, waits bounded by timeout.
func forSync(p *reconciler.Pipeline, s *v1alpha1.Sync, timeout time.Duration) reconciler.Pipeline {
	pp := *p
	pp.Options.Prune = s.PruneEnabled()
	pp.Options.HealthGates = pp.Options.HealthGates && s.WaitEnabled()
	pp.Options.Wait = pp.Options.Wait && s.WaitEnabled()
	if pp.Options.WaitTimeout <= 0 || pp.Options.WaitTimeout > timeout {
		pp.Options.WaitTimeout = timeout
	}
	return pp
}

// healthFailure is, with spec.wait, the HealthCheckFailed failure of a
// revision whose every stage was applied into target but whose
// components res reports Failed; nil otherwise.
func healthFailure(s *v1alpha1.Sync, res *reconciler.Result, revision, target string) *failure {
	failed := failedComponents(res)
	if failed == "" || !s.WaitEnabled() {
		return nil
	}
	return &failure{reason: v1alpha1.HealthCheckFailedReason, applied: true, err: fmt.Errorf("revision %s in %s: %s", revision, target, failed)}
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

// reportOnHC reports a fetch or render error of revision on the HC the
// Sync applied last (HCO's ReconcileComplete=False), as the single-source
// controller did; it does nothing when the Sync has applied no HC yet.
func (r *Reconciler) reportOnHC(ctx context.Context, p *reconciler.Pipeline, s *v1alpha1.Sync, revision string, err error) {
	hc := inventoryHC(s.Status.Inventory)
	if p == nil || hc.Name == "" {
		return
	}
	if _, serr := p.Sync(ctx, reconciler.Input{Err: err, HC: hc, Revision: revision}); serr != nil && !errors.Is(serr, err) {
		log.FromContext(ctx).Error(serr, "reporting on the HyperConverged", "hyperconverged", hc)
	}
}

// syncTimeout is spec.timeout, else DefaultTimeout: the bound of one
// reconcile (and of the deletes of a deletionPolicy Delete).
func syncTimeout(s *v1alpha1.Sync) time.Duration {
	if s.Spec.Timeout != nil && s.Spec.Timeout.Duration > 0 {
		return s.Spec.Timeout.Duration
	}
	return DefaultTimeout
}
