package virtcontroller_test

import (
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/operators/virt/virtcontroller"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
)

// env is a real API server with the engine's VM CRDs installed and the
// virt-controller role running in a manager as converge-controller runs
// it (Setup: its three controllers once the CRDs are established).
type env struct{ *virttest.Env }

func newEnv(t *testing.T) *env {
	t.Helper()
	opts := virtcontroller.DefaultOptions()
	opts.CRDPoll = 100 * time.Millisecond
	opts.SkipNameValidation = true
	return &env{virttest.New(t, func(mgr ctrl.Manager) error { return virtcontroller.Setup(mgr, opts) })}
}
