package synccontroller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/source"
	"github.com/converge-dev/converge/reconciler"
)

// TestReport gives report one outcome per case and checks what it
// writes: the conditions (all of them, as "Type=Status Reason: message"),
// the events, the revisions, the head of status.history, the requeue and
// the error.
func TestReport(t *testing.T) {
	const rev1, rev2 = "main@sha1:1111111111111111111111111111111111111111", "main@sha1:2222222222222222222222222222222222222222"
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
	}
	readyTrue := cond(v1alpha1.ReadyCondition, metav1.ConditionTrue, v1alpha1.SucceededReason, "Applied revision: "+rev1)
	fetchErr := errors.New("fetching https://git.example/config: connection refused")
	fetchFailed := cond(v1alpha1.ReadyCondition, metav1.ConditionFalse, v1alpha1.FetchFailedReason, fetchErr.Error())
	verifyErr := fmt.Errorf("commit %s: %w", rev2, source.ErrVerification)
	applyErr := errors.New("revision " + rev2 + " into the local cluster: KubeVirt/ns/kv: invalid")
	art := func(rev string) *source.Artifact {
		return &source.Artifact{Revision: rev, Verified: "the commit signature"}
	}
	changeSet := func(lines ...string) *ssa.ChangeSet {
		cs := ssa.NewChangeSet()
		for _, l := range lines {
			subject, action, _ := strings.Cut(l, " ")
			cs.Add(ssa.ChangeSetEntry{Subject: subject, Action: ssa.Action(action)})
		}
		return cs
	}
	healthy := []reconciler.ComponentHealth{{Name: "hco", Health: reconciler.Healthy}, {Name: "virt", Health: reconciler.Healthy}}
	waitMsg := "Revision " + rev2 + ": waiting for health: virt not healthy yet (status.components and converge tree say why)"
	ann := func(rev string) string { return " map[" + EventRevisionAnnotation + ":" + rev + "]" }

	for _, tc := range []struct {
		name string
		// verify sets spec.source.verify; noWait sets spec.wait false;
		// prior are the conditions before (status.lastAttemptedRevision and
		// lastAppliedRevision are rev1).
		verify bool
		noWait bool
		prior  []metav1.Condition
		out    outcome

		conditions []string
		events     []string
		attempted  string // status.lastAttemptedRevision after (rev1 before)
		applied    string // status.lastAppliedRevision after (rev1 before)
		history    string // status.history[0].lastReconciledStatus; "" for none
		requeue    time.Duration
		wantErr    bool
	}{
		{
			name:       "suspended keeps Ready's status",
			prior:      []metav1.Condition{readyTrue},
			out:        outcome{suspended: true},
			conditions: []string{`Ready=True Suspended: Reconciliation suspended (spec.suspend); last applied revision: "` + rev1 + `"`},
			attempted:  rev1, applied: rev1,
		},
		{
			name:  "dependency not ready",
			prior: []metav1.Condition{readyTrue},
			out:   outcome{dependency: errors.New("dependency Sync ns/base is not ready")},
			conditions: []string{
				"Ready=Unknown DependencyNotReady: dependency Sync ns/base is not ready",
				"Reconciling=True DependencyNotReady: dependency Sync ns/base is not ready",
			},
			attempted: rev1, applied: rev1, requeue: 10 * time.Second,
		},
		{
			name:  "failed fetch",
			prior: []metav1.Condition{readyTrue},
			out: outcome{fetch: &fetchCall{took: time.Second, err: fetchErr},
				failure: &failure{reason: v1alpha1.FetchFailedReason, err: fetchErr, onHC: true}},
			conditions: []string{
				"Ready=False FetchFailed: " + fetchErr.Error(),
				"Reconciling=True ProgressingWithRetry: " + fetchErr.Error(),
			},
			events:    []string{"Warning FetchFailed " + fetchErr.Error() + ann(rev1)},
			attempted: rev1, applied: rev1, requeue: 7 * time.Second, wantErr: true,
		},
		{
			name:  "failed fetch again: no second event",
			prior: []metav1.Condition{fetchFailed},
			out: outcome{fetch: &fetchCall{took: time.Second, err: fetchErr},
				failure: &failure{reason: v1alpha1.FetchFailedReason, err: fetchErr, onHC: true}},
			conditions: []string{
				"Ready=False FetchFailed: " + fetchErr.Error(),
				"Reconciling=True ProgressingWithRetry: " + fetchErr.Error(),
			},
			attempted: rev1, applied: rev1, requeue: 7 * time.Second, wantErr: true,
		},
		{
			name:   "verification failed stalls",
			verify: true,
			prior:  []metav1.Condition{readyTrue},
			out: outcome{fetch: &fetchCall{took: time.Second, err: verifyErr},
				failure: &failure{reason: v1alpha1.VerificationFailedReason, stalled: true, err: verifyErr, onHC: true}},
			conditions: []string{
				"Ready=False VerificationFailed: " + verifyErr.Error(),
				"SourceVerified=False VerificationFailed: " + verifyErr.Error(),
				"Stalled=True VerificationFailed: " + verifyErr.Error(),
			},
			events:    []string{"Warning VerificationFailed " + verifyErr.Error() + ann(rev1)},
			attempted: rev1, applied: rev1, requeue: time.Minute, wantErr: true,
		},
		{
			name:  "render failed after fetch",
			prior: []metav1.Condition{readyTrue},
			out: outcome{fetch: &fetchCall{took: time.Second}, artifact: art(rev2), target: "the local cluster",
				failure: &failure{reason: v1alpha1.RenderFailedReason, stalled: true, err: errors.New("revision " + rev2 + `, path ".": bad`), onHC: true}},
			conditions: []string{
				"Ready=False RenderFailed: revision " + rev2 + `, path ".": bad`,
				"Stalled=True RenderFailed: revision " + rev2 + `, path ".": bad`,
			},
			events:    []string{"Warning RenderFailed revision " + rev2 + `, path ".": bad` + ann(rev2)},
			attempted: rev2, applied: rev1, requeue: time.Minute, wantErr: true,
		},
		{
			name:  "waiting for health",
			prior: []metav1.Condition{readyTrue},
			out: outcome{fetch: &fetchCall{}, artifact: art(rev2), target: "the local cluster", digest: "sha256:d", synced: true,
				result: &reconciler.Result{ChangeSet: changeSet("ConfigMap/ns/a created", "ConfigMap/ns/b unchanged"), Waiting: true, RequeueAfter: 2 * time.Second,
					Components: []reconciler.ComponentHealth{{Name: "hco", Health: reconciler.Healthy}, {Name: "virt", Health: reconciler.Progressing, Message: "KubeVirt not Available"}}}},
			conditions: []string{
				"Healthy=Unknown WaitingForHealth: virt progressing",
				"Ready=Unknown WaitingForHealth: " + waitMsg,
				"Reconciling=True WaitingForHealth: " + waitMsg,
			},
			events:    []string{"Normal Progressing " + waitMsg + "\nConfigMap/ns/a created" + ann(rev2)},
			attempted: rev2, applied: rev1, history: v1alpha1.WaitingForHealthReason, requeue: 2 * time.Second,
		},
		{
			name:   "wait false: Ready once applied, health still reported",
			noWait: true,
			prior:  []metav1.Condition{readyTrue},
			out: outcome{fetch: &fetchCall{}, artifact: art(rev2), target: "the local cluster", digest: "sha256:d", synced: true,
				result: &reconciler.Result{ChangeSet: changeSet("ConfigMap/ns/a created"),
					Components: []reconciler.ComponentHealth{{Name: "hco", Health: reconciler.Healthy}, {Name: "virt", Health: reconciler.Progressing, Message: "KubeVirt not Available"}}}},
			conditions: []string{
				"Healthy=Unknown WaitingForHealth: virt progressing",
				"Ready=True ReconciliationSucceeded: Applied revision: " + rev2,
			},
			events:    []string{"Normal ReconciliationSucceeded Applied revision " + rev2 + "\nConfigMap/ns/a created" + ann(rev2)},
			attempted: rev2, applied: rev2, history: v1alpha1.SucceededReason, requeue: time.Minute,
		},
		{
			name:   "wait false: a Failed component is reported, the revision applied",
			noWait: true,
			prior:  []metav1.Condition{readyTrue},
			out: outcome{fetch: &fetchCall{}, artifact: art(rev2), target: "the local cluster", digest: "sha256:d", synced: true,
				result: &reconciler.Result{ChangeSet: changeSet(), Components: []reconciler.ComponentHealth{{Name: "hco", Health: reconciler.Healthy}, {Name: "virt", Health: reconciler.Failed, Message: "Degraded"}}}},
			conditions: []string{
				"Healthy=False HealthCheckFailed: virt: Degraded",
				"Ready=True ReconciliationSucceeded: Applied revision: " + rev2,
			},
			events:    []string{"Normal ReconciliationSucceeded Applied revision " + rev2 + ann(rev2)},
			attempted: rev2, applied: rev2, history: v1alpha1.SucceededReason, requeue: time.Minute,
		},
		{
			name:  "health check failed",
			prior: []metav1.Condition{readyTrue},
			out: outcome{fetch: &fetchCall{}, artifact: art(rev2), target: "the local cluster", digest: "sha256:d", synced: true,
				result:  &reconciler.Result{ChangeSet: changeSet(), Components: []reconciler.ComponentHealth{{Name: "hco", Health: reconciler.Healthy}, {Name: "virt", Health: reconciler.Failed, Message: "Degraded"}}},
				failure: &failure{reason: v1alpha1.HealthCheckFailedReason, err: errors.New("revision " + rev2 + " in the local cluster: virt: Degraded")}},
			conditions: []string{
				"Healthy=False HealthCheckFailed: virt: Degraded",
				"Ready=False HealthCheckFailed: revision " + rev2 + " in the local cluster: virt: Degraded",
				"Reconciling=True ProgressingWithRetry: revision " + rev2 + " in the local cluster: virt: Degraded",
			},
			events:    []string{"Warning HealthCheckFailed revision " + rev2 + " in the local cluster: virt: Degraded" + ann(rev2)},
			attempted: rev2, applied: rev1, history: v1alpha1.HealthCheckFailedReason, requeue: 7 * time.Second, wantErr: true,
		},
		{
			name: "apply failed again, with changes: an event all the same",
			prior: []metav1.Condition{cond(v1alpha1.ReadyCondition, metav1.ConditionFalse, v1alpha1.ApplyFailedReason, applyErr.Error()),
				cond(v1alpha1.ReconcilingCondition, metav1.ConditionTrue, v1alpha1.ProgressingWithRetryReason, applyErr.Error())},
			out: outcome{fetch: &fetchCall{}, artifact: art(rev2), target: "the local cluster", digest: "sha256:d", synced: true,
				result:  &reconciler.Result{ChangeSet: changeSet("Namespace/ns created")},
				failure: &failure{reason: v1alpha1.ApplyFailedReason, err: applyErr}},
			conditions: []string{
				"Ready=False ApplyFailed: " + applyErr.Error(),
				"Reconciling=True ProgressingWithRetry: " + applyErr.Error(),
			},
			events:    []string{"Warning ApplyFailed " + applyErr.Error() + "\nNamespace/ns created" + ann(rev2)},
			attempted: rev2, applied: rev1, history: v1alpha1.ApplyFailedReason, requeue: 7 * time.Second, wantErr: true,
		},
		{
			name:   "applied a new revision",
			verify: true,
			prior: []metav1.Condition{cond(v1alpha1.ReconcilingCondition, metav1.ConditionTrue, v1alpha1.ProgressingReason, "Applying revision "+rev2+" to the local cluster"),
				cond(v1alpha1.ReadyCondition, metav1.ConditionUnknown, v1alpha1.ProgressingReason, "Applying revision "+rev2+" to the local cluster")},
			out: outcome{fetch: &fetchCall{}, artifact: art(rev2), target: "the local cluster", digest: "sha256:d", synced: true,
				result: &reconciler.Result{ChangeSet: changeSet("ConfigMap/ns/a configured", "ConfigMap/ns/old deleted"), Components: healthy, Writes: 3}},
			conditions: []string{
				"Healthy=True ReconciliationSucceeded: All 2 components are healthy",
				"Ready=True ReconciliationSucceeded: Applied revision: " + rev2,
				"SourceVerified=True ReconciliationSucceeded: Verified the commit signature of revision " + rev2,
			},
			events:    []string{"Normal ReconciliationSucceeded Applied revision " + rev2 + "\nConfigMap/ns/a configured\nConfigMap/ns/old deleted" + ann(rev2)},
			attempted: rev2, applied: rev2, history: v1alpha1.SucceededReason, requeue: time.Minute,
		},
		{
			name:  "drift corrected",
			prior: []metav1.Condition{readyTrue},
			out: outcome{fetch: &fetchCall{}, artifact: art(rev1), target: "the local cluster", digest: "sha256:d", synced: true,
				result: &reconciler.Result{ChangeSet: changeSet("ConfigMap/ns/a configured", "ConfigMap/ns/b created"), Components: healthy,
					Drifted: []string{"ns_a__ConfigMap", "ns_b__ConfigMap"}}},
			conditions: []string{
				"Healthy=True ReconciliationSucceeded: All 2 components are healthy",
				"Ready=True ReconciliationSucceeded: Applied revision: " + rev1,
			},
			events:    []string{"Normal DriftCorrected Revision " + rev1 + ": corrected drift of 2 object(s)\nConfigMap/ns/a configured\nConfigMap/ns/b created" + ann(rev1)},
			attempted: rev1, applied: rev1, history: v1alpha1.SucceededReason, requeue: time.Minute,
		},
		{
			name:  "drift corrected, the corrected operand not healthy yet",
			prior: []metav1.Condition{readyTrue},
			out: outcome{fetch: &fetchCall{}, artifact: art(rev1), target: "the local cluster", digest: "sha256:d", synced: true,
				result: &reconciler.Result{ChangeSet: changeSet("KubeVirt/ns/kv configured"), Drifted: []string{"ns_kv_kubevirt.io_KubeVirt"},
					Components: []reconciler.ComponentHealth{{Name: "hco", Health: reconciler.Healthy}, {Name: "virt", Health: reconciler.Progressing, Message: "KubeVirt/ns/kv: generation 3 applied, not read back yet (read 2)"}}}},
			conditions: []string{
				"Healthy=Unknown WaitingForHealth: virt progressing",
				"Ready=Unknown WaitingForHealth: Revision " + rev1 + ": waiting for health: virt not healthy yet (status.components and converge tree say why)",
				"Reconciling=True WaitingForHealth: Revision " + rev1 + ": waiting for health: virt not healthy yet (status.components and converge tree say why)",
			},
			events:    []string{"Normal DriftCorrected Revision " + rev1 + ": corrected drift of 1 object(s); waiting for health: virt not healthy yet (status.components and converge tree say why)\nKubeVirt/ns/kv configured" + ann(rev1)},
			attempted: rev1, applied: rev1, history: v1alpha1.WaitingForHealthReason, requeue: 5 * time.Second,
		},
		{
			name:  "nothing changed and Ready already: no event",
			prior: []metav1.Condition{readyTrue},
			out: outcome{fetch: &fetchCall{}, artifact: art(rev1), target: "the local cluster", digest: "sha256:d", synced: true,
				result: &reconciler.Result{ChangeSet: changeSet("ConfigMap/ns/a unchanged"), Components: healthy}},
			conditions: []string{
				"Healthy=True ReconciliationSucceeded: All 2 components are healthy",
				"Ready=True ReconciliationSucceeded: Applied revision: " + rev1,
			},
			attempted: rev1, applied: rev1, history: v1alpha1.SucceededReason, requeue: time.Minute,
		},
		{
			name: "Ready again at the same revision",
			prior: []metav1.Condition{cond(v1alpha1.ReadyCondition, metav1.ConditionFalse, v1alpha1.ApplyFailedReason, applyErr.Error()),
				cond(v1alpha1.ReconcilingCondition, metav1.ConditionTrue, v1alpha1.ProgressingWithRetryReason, applyErr.Error())},
			out: outcome{fetch: &fetchCall{}, artifact: art(rev1), target: "the local cluster", digest: "sha256:d", synced: true,
				result: &reconciler.Result{ChangeSet: changeSet(), Components: healthy}},
			conditions: []string{
				"Healthy=True ReconciliationSucceeded: All 2 components are healthy",
				"Ready=True ReconciliationSucceeded: Applied revision: " + rev1,
			},
			events:    []string{"Normal ReconciliationSucceeded Applied revision " + rev1 + ann(rev1)},
			attempted: rev1, applied: rev1, history: v1alpha1.SucceededReason, requeue: time.Minute,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", Generation: 2}}
			s.Spec.Interval = metav1.Duration{Duration: time.Minute}
			s.Spec.RetryInterval = &metav1.Duration{Duration: 7 * time.Second}
			if tc.verify {
				s.Spec.Source.Verify = &v1alpha1.Verification{SecretRef: v1alpha1.LocalObjectReference{Name: "keys"}}
			}
			if tc.noWait {
				s.Spec.Wait = new(bool)
			}
			s.Status.LastAttemptedRevision, s.Status.LastAppliedRevision = rev1, rev1
			for _, c := range tc.prior {
				setCondition(s, c.Type, c.Status, c.Reason, c.Message)
			}
			// As reconcile does: what Ready and the applied revision were
			// before (unless the case says otherwise, e.g. before the
			// "Progressing" patch of a new revision).
			tc.out.start, tc.out.prevApplied = time.Now(), rev1
			if tc.out.prevReady == nil {
				for _, c := range tc.prior {
					if c.Type == v1alpha1.ReadyCondition {
						tc.out.prevReady = &c
					}
				}
			}
			events := record.NewFakeRecorder(10)
			opts := DefaultOptions()
			opts.Jitter = 0
			r := &Reconciler{Events: events, Options: opts}

			res, err := r.report(context.Background(), s, tc.out)

			var conds []string
			for _, c := range s.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
				if c.ObservedGeneration != 2 {
					t.Errorf("condition %s: observedGeneration %d, want 2", c.Type, c.ObservedGeneration)
				}
			}
			sort.Strings(conds)
			if strings.Join(conds, "\n") != strings.Join(tc.conditions, "\n") {
				t.Errorf("conditions:\n%s\nwant:\n%s", strings.Join(conds, "\n"), strings.Join(tc.conditions, "\n"))
			}
			close(events.Events)
			var got []string
			for e := range events.Events {
				got = append(got, e)
			}
			if strings.Join(got, "\n---\n") != strings.Join(tc.events, "\n---\n") {
				t.Errorf("events:\n%q\nwant:\n%q", got, tc.events)
			}
			if s.Status.LastAttemptedRevision != tc.attempted || s.Status.LastAppliedRevision != tc.applied {
				t.Errorf("revisions attempted %s applied %s, want %s and %s", s.Status.LastAttemptedRevision, s.Status.LastAppliedRevision, tc.attempted, tc.applied)
			}
			switch {
			case tc.history == "" && len(s.Status.History) > 0:
				t.Errorf("history %+v, want none", s.Status.History)
			case tc.history != "" && (len(s.Status.History) != 1 || s.Status.History[0].LastReconciledStatus != tc.history ||
				s.Status.History[0].Revision != tc.attempted || s.Status.History[0].Digest != "sha256:d"):
				t.Errorf("history %+v, want one snapshot of %s, sha256:d, %s", s.Status.History, tc.attempted, tc.history)
			}
			if res.RequeueAfter != tc.requeue || (err != nil) != tc.wantErr {
				t.Errorf("report = requeue %v, error %v; want %v, error %v", res.RequeueAfter, err, tc.requeue, tc.wantErr)
			}
			if err != nil && tc.out.failure != nil && err != tc.out.failure.err {
				t.Errorf("error %v, want the failure's %v", err, tc.out.failure.err)
			}
		})
	}
}
