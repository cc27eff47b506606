package synccontroller

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fluxcd/pkg/ssa"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// setCondition sets a condition of s for its current generation; the
// transition time only moves when the status does.
func setCondition(s *v1alpha1.Sync, typ string, status metav1.ConditionStatus, reason, msg string) {
	apimeta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: trim(msg), ObservedGeneration: s.Generation,
	})
}

// trim keeps a condition message under the API's 32768-byte limit.
func trim(msg string) string {
	const max = 32000
	if len(msg) > max {
		return msg[:max] + "…"
	}
	return msg
}

func removeCondition(s *v1alpha1.Sync, typ string) {
	apimeta.RemoveStatusCondition(&s.Status.Conditions, typ)
}

// markReady sets Ready=True and drops Reconciling and Stalled.
func markReady(s *v1alpha1.Sync, msg string) {
	setCondition(s, v1alpha1.ReadyCondition, metav1.ConditionTrue, v1alpha1.SucceededReason, msg)
	removeCondition(s, v1alpha1.ReconcilingCondition)
	removeCondition(s, v1alpha1.StalledCondition)
}

// markFailed sets Ready=False with reason; a stalled failure sets
// Stalled=True and drops Reconciling, another sets Reconciling=True
// ProgressingWithRetry and drops Stalled.
func markFailed(s *v1alpha1.Sync, reason string, stalled bool, msg string) {
	setCondition(s, v1alpha1.ReadyCondition, metav1.ConditionFalse, reason, msg)
	if stalled {
		setCondition(s, v1alpha1.StalledCondition, metav1.ConditionTrue, reason, msg)
		removeCondition(s, v1alpha1.ReconcilingCondition)
		return
	}
	setCondition(s, v1alpha1.ReconcilingCondition, metav1.ConditionTrue, v1alpha1.ProgressingWithRetryReason, msg)
	removeCondition(s, v1alpha1.StalledCondition)
}

// markProgressing sets Reconciling=True and Ready=Unknown with reason
// (Progressing, WaitingForHealth, DependencyNotReady), dropping Stalled.
func markProgressing(s *v1alpha1.Sync, reason, msg string) {
	setCondition(s, v1alpha1.ReconcilingCondition, metav1.ConditionTrue, reason, msg)
	setCondition(s, v1alpha1.ReadyCondition, metav1.ConditionUnknown, reason, msg)
	removeCondition(s, v1alpha1.StalledCondition)
}

// recordHistory puts the reconcile of (revision, digest) at the head of
// status.history: an existing snapshot of the same revision and digest is
// updated and moved to the front, else a new one is added; at most limit
// are kept, newest first.
func recordHistory(s *v1alpha1.Sync, revision, digest string, start time.Time, d time.Duration, status string, limit int) {
	now := metav1.NewTime(start.Truncate(time.Second))
	snap := v1alpha1.Snapshot{Revision: revision, Digest: digest, FirstReconciled: now}
	rest := make([]v1alpha1.Snapshot, 0, len(s.Status.History))
	for _, h := range s.Status.History {
		if h.Revision == revision && h.Digest == digest {
			snap = h
			continue
		}
		rest = append(rest, h)
	}
	snap.LastReconciled = now
	snap.LastReconciledDuration = metav1.Duration{Duration: d.Round(time.Millisecond)}
	snap.LastReconciledStatus = status
	snap.TotalReconciliations++
	s.Status.History = append([]v1alpha1.Snapshot{snap}, rest...)
	if len(s.Status.History) > limit {
		s.Status.History = s.Status.History[:limit]
	}
}

// changes lists the entries of cs that changed something, as
// "Kind/ns/name created|configured|deleted", one a line, sorted.
func changes(cs *ssa.ChangeSet) []string {
	if cs == nil {
		return nil
	}
	var out []string
	for _, e := range cs.Entries {
		switch e.Action {
		case ssa.CreatedAction, ssa.ConfiguredAction, ssa.DeletedAction:
			out = append(out, e.Subject+" "+string(e.Action))
		}
	}
	sort.Strings(out)
	return out
}

// eventMessage is the message of a reconcile's event: a headline and the
// changed objects, one a line.
func eventMessage(head string, lines []string) string {
	if len(lines) == 0 {
		return head
	}
	return fmt.Sprintf("%s\n%s", head, strings.Join(lines, "\n"))
}
