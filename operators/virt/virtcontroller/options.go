package virtcontroller

import (
	"context"
	"time"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/nodehealth"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vm"
)

// Options are the virt-controller role's settings.
type Options struct {
	// UnschedulableRetry is how often an unschedulable VMI is tried again
	// besides on node and placement changes (scheduler.Options).
	UnschedulableRetry time.Duration
	// CRDPoll is how often Setup checks whether the VirtualMachine and
	// VirtualMachineInstance CRDs are installed yet.
	CRDPoll time.Duration
	// HeartbeatTimeout is how old a node agent's kubevirt.io/heartbeat may
	// get before its VMIs are failed with reason NodeUnresponsive
	// (nodehealth.Options).
	HeartbeatTimeout time.Duration
	// Concurrency is how many VMs are reconciled in parallel
	// (vm.Options; the scheduler always decides one VMI at a time).
	Concurrency int
	// SkipNameValidation lets several managers in one process register
	// the controllers (controller-runtime requires unique controller
	// names per process); for tests.
	SkipNameValidation bool
	// Gate, when set, holds the controllers back after the CRDs until it
	// returns nil (the virt operator's: a native KubeVirt CR exists); an
	// error other than the context's ends Setup's runnable with it.
	Gate func(ctx context.Context) error
	// Ratios, when set, gives the VMI scheduler's request ratios
	// (scheduler.Options.Ratios).
	Ratios func() scheduler.Ratios
}

// DefaultOptions gives the controllers' own defaults, UnschedulableRetry
// 30 s, HeartbeatTimeout 5 min (KubeVirt's) and Concurrency 4, and
// CRDPoll 5 s.
func DefaultOptions() Options {
	return Options{
		UnschedulableRetry: scheduler.DefaultOptions().UnschedulableRetry,
		CRDPoll:            5 * time.Second,
		HeartbeatTimeout:   nodehealth.DefaultOptions().HeartbeatTimeout,
		Concurrency:        vm.DefaultOptions().Concurrency,
	}
}
