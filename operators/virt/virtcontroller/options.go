package virtcontroller

import "time"

// Options are the virt-controller role's settings.
type Options struct {
	// UnschedulableRetry is how often an unschedulable VMI is tried again
	// besides on node and placement changes.
	UnschedulableRetry time.Duration
	// CRDPoll is how often Setup checks whether the VirtualMachine and
	// VirtualMachineInstance CRDs are installed yet.
	CRDPoll time.Duration
	// HeartbeatTimeout is how old a node agent's kubevirt.io/heartbeat may
	// get before its VMIs are failed with reason NodeUnresponsive
	// (NodeHealthReconciler).
	HeartbeatTimeout time.Duration
	// Concurrency is how many VMs are reconciled in parallel (the
	// scheduler always decides one VMI at a time).
	Concurrency int
	// SkipNameValidation lets several managers in one process register
	// the controllers (controller-runtime requires unique controller
	// names per process); for tests.
	SkipNameValidation bool
}

// DefaultOptions gives UnschedulableRetry 30 s, CRDPoll 5 s,
// HeartbeatTimeout 5 min (KubeVirt's) and Concurrency 4.
func DefaultOptions() Options {
	return Options{UnschedulableRetry: 30 * time.Second, CRDPoll: 5 * time.Second, HeartbeatTimeout: 5 * time.Minute, Concurrency: 4}
}
