package synccontroller

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/reconciler"
)

// refreshStage answers a reconcile that only status-only changes of
// applied objects asked for (wakes, statusOnly) — an operator updating
// its CR's conditions — by recomputing the components' health and the
// HyperConverged's status from the live objects
// (reconciler.Pipeline.Refresh) for the rendering the Sync last applied
// whole, with no fetch, render or apply: one commit, one apply.
//
// It declines (ok false; the caller runs the stages) unless the Sync's
// last reconcile applied every stage (settledSync) and since then its
// generation is still the one applied and observed, its reconcile
// request annotation was handled, its interval has not come round, it
// still writes into the same target, whose cache is settled, and no
// health gate would now defer a component. A failed refresh also
// declines, so the full reconcile reports it.
func (r *Reconciler) refreshStage(ctx context.Context, s *v1alpha1.Sync, out outcome) (outcome, bool) {
	key := client.ObjectKeyFromObject(s)
	last, ok := r.settled.get(key)
	if why := refreshBlocked(s, last, ok, specInterval(s)); why != "" {
		log.FromContext(ctx).V(1).Info("status-only change: reconciling in full", "why", why)
		return out, false
	}
	t, p, err := r.targets.get(ctx, s)
	if err != nil || t != last.target || t.unsettled.is(key) {
		log.FromContext(ctx).V(1).Info("status-only change: reconciling in full", "why", "the target changed or is unsettled")
		return out, false
	}
	pp := forSync(p, s, syncTimeout(s))
	revision := last.artifact.Revision
	t.own.begin(key)
	pp.Options.Wrote = func(id, version string) { t.own.wrote(key, id, version) }
	res, err := pp.Refresh(ctx, reconciler.Input{Rendered: last.rendering.rendered, Revision: revision, Inventory: StatusStore{Sync: s}})
	complete := err == nil && res != nil && !res.Waiting
	var saved *v1alpha1.Inventory
	if complete {
		saved = res.Inventory
	}
	if foreign, statusOnly := t.own.end(key, saved); foreign {
		r.wake(key, statusOnly)
	}
	if !complete {
		why := "a health gate would defer a component"
		if err != nil {
			why = err.Error()
		}
		log.FromContext(ctx).V(1).Info("status refresh declined: reconciling in full", "why", why)
		return out, false
	}
	out.artifact, out.target, out.digest = &last.artifact, t.name, last.rendering.digest
	out.result, out.refreshed = res, true
	out.failure = healthFailure(s, res, revision, t.name)
	return out, true
}

// refreshBlocked says why s may not be refreshed from last (ok: there is
// one; interval: s's interval without jitter), or "" when it may.
func refreshBlocked(s *v1alpha1.Sync, last settledSync, ok bool, interval time.Duration) string {
	switch {
	case !ok:
		return "its last reconcile did not apply every stage"
	case s.Generation != last.generation || s.Status.ObservedGeneration != s.Generation:
		return "its spec changed"
	case requested(s):
		return "a reconcile was requested"
	case s.Status.LastAttemptedRevision != last.artifact.Revision:
		return "another revision was attempted"
	case time.Since(last.at) >= interval:
		return "its interval came round"
	}
	return ""
}

// requested reports whether s carries a reconcile request annotation not
// handled yet.
func requested(s *v1alpha1.Sync) bool {
	v, ok := s.Annotations[v1alpha1.ReconcileRequestAnnotation]
	return ok && v != s.Status.LastHandledReconcileAt
}

// settle records, after the stages ran, whether out applied every stage
// of rd: then later status-only changes may be refreshed (refreshStage);
// otherwise, or when the stages failed earlier, they may not.
func (r *Reconciler) settle(s *v1alpha1.Sync, f fetched, rd rendering, out outcome) {
	key := client.ObjectKeyFromObject(s)
	if out.result == nil || out.result.Waiting || (out.failure != nil && !out.failure.applied) {
		r.settled.forget(key)
		return
	}
	r.settled.put(key, settledSync{generation: s.Generation, artifact: f.artifact, rendering: rd, target: f.target, at: out.start})
}
