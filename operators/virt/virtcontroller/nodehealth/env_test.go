package nodehealth_test

import (
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/nodehealth"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vm"
)

// env is a real API server with the engine's VM CRDs installed and the
// node controller running in a manager, with the VirtualMachine
// controller and the VMI scheduler, which recreate and place again a VM
// whose VMI the node controller failed.
type env struct{ *virttest.Env }

func newEnv(t *testing.T) *env {
	t.Helper()
	vmOpts, schedOpts, nodeOpts := vm.DefaultOptions(), scheduler.DefaultOptions(), nodehealth.DefaultOptions()
	vmOpts.SkipNameValidation, schedOpts.SkipNameValidation, nodeOpts.SkipNameValidation = true, true, true
	return &env{virttest.New(t,
		func(mgr ctrl.Manager) error { return vm.SetupWithManager(mgr, vmOpts) },
		func(mgr ctrl.Manager) error { return scheduler.SetupWithManager(mgr, schedOpts) },
		func(mgr ctrl.Manager) error { return nodehealth.SetupWithManager(mgr, nodeOpts) })}
}
