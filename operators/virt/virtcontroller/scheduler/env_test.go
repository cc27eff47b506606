package scheduler_test

import (
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

// env is a real API server with the engine's VM CRDs installed and the
// VMI scheduler running in a manager.
type env struct{ *virttest.Env }

func newEnv(t *testing.T) *env {
	t.Helper()
	opts := scheduler.DefaultOptions()
	opts.SkipNameValidation = true
	return &env{virttest.New(t, func(mgr ctrl.Manager) error { return scheduler.SetupWithManager(mgr, opts) })}
}
