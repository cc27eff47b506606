package datavolume

import "time"

// Options are the cdi-controller role's settings.
type Options struct {
	// CRDPoll is how often Setup checks whether the DataVolume CRD is
	// installed yet.
	CRDPoll time.Duration
	// Concurrency is how many DataVolumes are reconciled in parallel.
	Concurrency int
	// SkipNameValidation lets several managers in one process register
	// the controller (controller-runtime requires unique controller names
	// per process); for tests.
	SkipNameValidation bool
}

// DefaultOptions gives CRDPoll 5 s and Concurrency 4.
func DefaultOptions() Options {
	return Options{CRDPoll: 5 * time.Second, Concurrency: 4}
}
