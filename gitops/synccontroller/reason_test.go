package synccontroller

import (
	"errors"
	"fmt"
	"testing"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/reconciler"
)

// TestApplyReason maps Pipeline.Sync errors to Ready reasons by their
// type, never by their text.
func TestApplyReason(t *testing.T) {
	cause := errors.New("KubeVirt/kubevirt-hyperconverged/kv: invalid")
	stage := func(p reconciler.Phase) error {
		return &reconciler.StageError{Phase: p, Stage: "virt", Err: cause}
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"apply", stage(reconciler.PhaseApply), v1alpha1.ApplyFailedReason},
		{"health", stage(reconciler.PhaseHealth), v1alpha1.HealthCheckFailedReason},
		{"prune", &reconciler.StageError{Phase: reconciler.PhasePrune, Err: cause}, v1alpha1.PruneFailedReason},
		{"wrapped health", fmt.Errorf("revision main@sha1:1 into the local cluster: %w", stage(reconciler.PhaseHealth)), v1alpha1.HealthCheckFailedReason},
		{"wrapped prune", fmt.Errorf("revision x: %w", &reconciler.StageError{Phase: reconciler.PhasePrune, Err: cause}), v1alpha1.PruneFailedReason},
		{"not a stage error", errors.New("writing inventory: conflict"), v1alpha1.ApplyFailedReason},
		{"text alone does not count", errors.New("stage virt: health check: timeout"), v1alpha1.ApplyFailedReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := applyReason(tc.err); got != tc.want {
				t.Errorf("applyReason(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}
