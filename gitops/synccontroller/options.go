package synccontroller

import (
	"time"

	"github.com/converge-dev/converge/reconciler"
)

// Options tunes the Reconciler.
type Options struct {
	// Concurrency is how many Syncs are reconciled in parallel.
	Concurrency int
	// DependencyRequeue is how long a Sync whose dependsOn are not ready
	// waits before it checks again (Flux's --requeue-dependency, 30s).
	DependencyRequeue time.Duration
	// HealthRequeue is how long a Sync whose components are waiting for
	// their dependencies' health waits before the next reconcile.
	HealthRequeue time.Duration
	// RetryInterval is how long a Sync waits after an error a retry may
	// fix (fetch, apply, target unreachable, deletion failed).
	RetryInterval time.Duration
	// Jitter is the largest fraction of spec.interval added at random to
	// each requeue, so Syncs created together spread out (Flux's
	// --interval-jitter-percentage, 5%).
	Jitter float64
	// HistoryLimit is how many revisions status.history keeps.
	HistoryLimit int
	// Pipeline is the base of every target's Pipeline options; Prune and
	// WaitTimeout are overridden per Sync from spec.prune and spec.timeout.
	Pipeline reconciler.Options
	// Lockdown limits what a Sync may name (local sources, other
	// namespaces) and whom it writes as; the zero value refuses local
	// sources only.
	Lockdown Lockdown
}

// DefaultOptions returns 4 Syncs in parallel, a 10s dependency requeue, a
// 5s health requeue, a 10s retry interval, 5% jitter, 5 history entries
// and reconciler.DefaultOptions().
func DefaultOptions() Options {
	return Options{
		Concurrency:       4,
		DependencyRequeue: 10 * time.Second,
		HealthRequeue:     5 * time.Second,
		RetryInterval:     10 * time.Second,
		Jitter:            0.05,
		HistoryLimit:      5,
		Pipeline:          reconciler.DefaultOptions(),
	}
}
