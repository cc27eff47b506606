package synccontroller

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/reconciler"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// setComponents sets status.components from res.Components (graph order)
// and the Healthy condition: True when every component is Healthy, False
// with reason HealthCheckFailed when one Failed, Unknown with reason
// WaitingForHealth while some are Progressing or Waiting. A result without
// components (an apply that failed before any stage) changes nothing.
func setComponents(s *v1alpha1.Sync, res *reconciler.Result) {
	if res == nil || len(res.Components) == 0 {
		return
	}
	s.Status.Components = make([]v1alpha1.ComponentStatus, 0, len(res.Components))
	var failed, pending []string
	for _, c := range res.Components {
		s.Status.Components = append(s.Status.Components, v1alpha1.ComponentStatus{Name: c.Name, Health: string(c.Health), Message: c.Message})
		switch c.Health {
		case reconciler.Healthy:
		case reconciler.Failed:
			failed = append(failed, c.Name+": "+c.Message)
		default:
			pending = append(pending, fmt.Sprintf("%s %s", c.Name, strings.ToLower(string(c.Health))))
		}
	}
	switch {
	case len(failed) > 0:
		setCondition(s, v1alpha1.HealthyCondition, metav1.ConditionFalse, v1alpha1.HealthCheckFailedReason, strings.Join(failed, "; "))
	case len(pending) > 0:
		setCondition(s, v1alpha1.HealthyCondition, metav1.ConditionUnknown, v1alpha1.WaitingForHealthReason, strings.Join(pending, ", "))
	default:
		setCondition(s, v1alpha1.HealthyCondition, metav1.ConditionTrue, v1alpha1.SucceededReason,
			fmt.Sprintf("All %d components are healthy", len(res.Components)))
	}
}

// waitingMessage names the components that are not healthy, grouped by
// their health (Failed, Progressing, Waiting); why each one is not healthy
// is in status.components.
func waitingMessage(res *reconciler.Result) string {
	byHealth := map[reconciler.Health][]string{}
	for _, c := range res.Components {
		if c.Health != reconciler.Healthy {
			byHealth[c.Health] = append(byHealth[c.Health], c.Name)
		}
	}
	var parts []string
	for _, h := range []struct {
		health reconciler.Health
		what   string
	}{
		{reconciler.Failed, "failed"},
		{reconciler.Progressing, "not healthy yet"},
		{reconciler.Waiting, "held back until their dependencies are healthy"},
	} {
		if names := byHealth[h.health]; len(names) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", strings.Join(names, ", "), h.what))
		}
	}
	return strings.Join(parts, "; ") + " (status.components and converge tree say why)"
}

// driftByKind counts res.Drifted (inventory IDs) by kind.
func driftByKind(res *reconciler.Result) map[string]int {
	out := map[string]int{}
	for _, id := range res.Drifted {
		if _, _, gk, err := inventory.ParseID(id); err == nil {
			out[gk.Kind]++
		}
	}
	return out
}

// failedComponents describes the Failed components of res ("" if none).
func failedComponents(res *reconciler.Result) string {
	var msgs []string
	for _, c := range res.Components {
		if c.Health == reconciler.Failed {
			msgs = append(msgs, c.Name+": "+c.Message)
		}
	}
	return strings.Join(msgs, "; ")
}

// allHealthy reports whether every component of res is Healthy: only
// then is the revision applied (Ready=True, lastAppliedRevision), as
// Flux's health checks gate lastAppliedRevision. A component still
// Progressing keeps the Sync Reconciling and requeued soon.
func allHealthy(res *reconciler.Result) bool {
	for _, c := range res.Components {
		if c.Health != reconciler.Healthy {
			return false
		}
	}
	return true
}
