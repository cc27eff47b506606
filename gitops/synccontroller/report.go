package synccontroller

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/source"
)

// report writes what one reconcile came to, from its outcome and in this
// one place, as Flux's kustomize-controller finalizes a Kustomization's
// status from its reconcile result (fluxcd/pkg/runtime's summarize
// helper): the conditions (Ready, Reconciling, Stalled, SourceVerified,
// Healthy), status.components, status.history, lastAttemptedRevision and
// lastAppliedRevision; at most one Kubernetes event, emitted only when
// something changed (a failure whose reason or message differs from the
// last Ready, or that changed objects; a new revision, changes, drift
// corrected, or Ready again); the fetch, change set, drift and revision
// metrics; the log line (the logger of ctx, with the revision once
// fetched). It returns when to come back (spec.interval
// plus jitter when done or stalled, the retry interval after a failure a
// retry may fix, sooner while components wait for health or
// dependencies) and the reconcile's error.
func (r *Reconciler) report(ctx context.Context, s *v1alpha1.Sync, out outcome) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	switch {
	case out.suspended:
		status := metav1.ConditionUnknown
		if c := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
			status = c.Status
		}
		setCondition(s, v1alpha1.ReadyCondition, status, v1alpha1.SuspendedReason,
			fmt.Sprintf("Reconciliation suspended (spec.suspend); last applied revision: %q", s.Status.LastAppliedRevision))
		removeCondition(s, v1alpha1.ReconcilingCondition)
		logger.V(1).Info("suspended")
		return ctrl.Result{}, nil
	case out.dependency != nil:
		markProgressing(s, v1alpha1.DependencyNotReadyReason, out.dependency.Error())
		logger.Info("dependencies not ready", "reason", out.dependency.Error())
		return ctrl.Result{RequeueAfter: r.Options.DependencyRequeue}, nil
	}

	key := metricsKey(s)
	if out.fetch != nil {
		r.Metrics.RecordFetch(key, out.fetch.took, out.fetch.err)
	}
	if f := out.failure; f != nil && f.reason == v1alpha1.VerificationFailedReason {
		setCondition(s, v1alpha1.SourceVerifiedCondition, metav1.ConditionFalse, f.reason, f.err.Error())
	}
	if out.artifact != nil {
		recordSource(s, out.artifact)
		logger = logger.WithValues("revision", out.artifact.Revision)
	}
	res := out.result
	var lines []string
	if res != nil {
		r.Metrics.RecordChangeSet(key, res.ChangeSet)
		for kind, n := range driftByKind(res) {
			r.Metrics.RecordDrift(key, kind, n)
		}
		lines = changes(res.ChangeSet)
		setComponents(s, res)
	}
	// A status refresh reconciled no revision: status.history records
	// reconciles only.
	history := func(status string) {
		if !out.refreshed {
			recordHistory(s, out.artifact.Revision, out.digest, out.start, time.Since(out.start), status, r.Options.HistoryLimit)
		}
	}

	if f := out.failure; f != nil {
		if out.synced {
			history(f.reason)
		}
		msg := f.err.Error()
		markFailed(s, f.reason, f.stalled, msg)
		if out.prevReady == nil || out.prevReady.Reason != f.reason || out.prevReady.Message != trim(msg) || len(lines) > 0 {
			r.event(s, s.Status.LastAttemptedRevision, "Warning", f.reason, eventMessage(msg, lines))
		}
		logger.Error(f.err, "reconcile failed", "reason", f.reason, "stalled", f.stalled)
		if f.stalled {
			return ctrl.Result{RequeueAfter: r.interval(s)}, f.err
		}
		return ctrl.Result{RequeueAfter: r.retryInterval(s)}, f.err
	}

	revision := out.artifact.Revision
	// With spec.wait false the revision is applied once every stage was
	// sent; the Healthy condition and status.components keep reporting
	// the components' health.
	if s.WaitEnabled() && (res.Waiting || !allHealthy(res)) {
		msg := fmt.Sprintf("Revision %s: waiting for health: %s", revision, waitingMessage(res))
		markProgressing(s, v1alpha1.WaitingForHealthReason, msg)
		history(v1alpha1.WaitingForHealthReason)
		switch {
		case revision == out.prevApplied && len(res.Drifted) > 0:
			// Re-applying what someone changed can itself move an
			// operand's generation: the correction is announced now, not
			// lost behind the health wait it starts.
			r.event(s, revision, "Normal", v1alpha1.DriftCorrectedReason, eventMessage(
				fmt.Sprintf("Revision %s: corrected drift of %d object(s); waiting for health: %s", revision, len(res.Drifted), waitingMessage(res)), lines))
		case len(lines) > 0:
			r.event(s, revision, "Normal", v1alpha1.ProgressingReason, eventMessage(msg, lines))
		}
		logger.Info("waiting for health", "changes", lines, "message", msg)
		after := r.Options.HealthRequeue
		if res.RequeueAfter > 0 && res.RequeueAfter < after {
			after = res.RequeueAfter
		}
		return ctrl.Result{RequeueAfter: after}, nil
	}

	s.Status.LastAppliedRevision = revision
	markReady(s, "Applied revision: "+revision)
	history(v1alpha1.SucceededReason)
	r.Metrics.RecordRevision(key, revision)
	switch prev := out.prevReady; {
	case revision == out.prevApplied && len(res.Drifted) > 0:
		r.event(s, revision, "Normal", v1alpha1.DriftCorrectedReason, eventMessage(
			fmt.Sprintf("Revision %s: corrected drift of %d object(s)", revision, len(res.Drifted)), lines))
	case revision != out.prevApplied || len(lines) > 0 || prev == nil || prev.Status != metav1.ConditionTrue:
		r.event(s, revision, "Normal", v1alpha1.SucceededReason, eventMessage("Applied revision "+revision, lines))
	}
	// Each changed object by identity and action, as Flux logs its change
	// set; drifted lists the inventory IDs whose drift was reverted.
	msg := "reconciled"
	if out.refreshed {
		msg = "refreshed status"
	}
	logger.Info(msg, "changes", lines, "drifted", res.Drifted, "writes", res.Writes, "duration", time.Since(out.start).Round(time.Millisecond))
	return ctrl.Result{RequeueAfter: r.interval(s)}, nil
}

// recordSource records a fetched revision: status.lastAttemptedRevision,
// and SourceVerified True ("Verified <what> of revision <revision>") when
// spec.source.verify is set, else no SourceVerified condition.
func recordSource(s *v1alpha1.Sync, art *source.Artifact) {
	s.Status.LastAttemptedRevision = art.Revision
	if s.Spec.Source.Verify != nil {
		setCondition(s, v1alpha1.SourceVerifiedCondition, metav1.ConditionTrue, v1alpha1.SucceededReason,
			fmt.Sprintf("Verified %s of revision %s", art.Verified, art.Revision))
	} else {
		removeCondition(s, v1alpha1.SourceVerifiedCondition)
	}
}
