package vm_test

import (
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
	vmcontroller "github.com/converge-dev/converge/operators/virt/virtcontroller/vm"
)

// env is a real API server with the engine's VM CRDs installed and the
// VirtualMachine controller running in a manager, with the VMI scheduler,
// whose Unschedulable condition the VM's status follows (no node runs the
// agent unless a test adds one).
type env struct{ *virttest.Env }

func newEnv(t *testing.T) *env {
	t.Helper()
	vmOpts, schedOpts := vmcontroller.DefaultOptions(), scheduler.DefaultOptions()
	vmOpts.SkipNameValidation, schedOpts.SkipNameValidation = true, true
	return &env{virttest.New(t,
		func(mgr ctrl.Manager) error { return vmcontroller.SetupWithManager(mgr, vmOpts) },
		func(mgr ctrl.Manager) error { return scheduler.SetupWithManager(mgr, schedOpts) })}
}
