// Package reconciler drives a rendered component graph into a cluster:
// staged server-side apply with health gates, an inventory of what was
// applied, pruning of what the config no longer holds, and the
// HyperConverged's status. The Pipeline is shared by `converge apply` and
// converge-controller, which adds a Git source, an interval and watches.
package reconciler

import (
	"time"

	"github.com/fluxcd/pkg/ssa"
)

// Labels and annotations converge uses on the objects it applies.
const (
	// FieldManager is the server-side apply field manager.
	FieldManager = "converge"
	// OwnerGroup prefixes the ownership labels converge.dev/name and
	// converge.dev/namespace (the HC's name and namespace).
	OwnerGroup = "converge.dev"
	// PruneAnnotation set to "disabled" keeps an object when it leaves
	// the config.
	PruneAnnotation = "converge.dev/prune"
)

// Options tunes the pipeline.
type Options struct {
	// Concurrency is how many objects of a stage are applied in parallel.
	Concurrency int
	// WaitTimeout bounds each stage's health wait.
	WaitTimeout time.Duration
	// WaitInterval is the poll interval of the health wait.
	WaitInterval time.Duration
	// Prune deletes objects that left the config.
	Prune bool
}

// DefaultOptions returns concurrency 16, a 2-minute wait per stage polled
// every 500ms, and pruning on.
func DefaultOptions() Options {
	return Options{Concurrency: 16, WaitTimeout: 2 * time.Minute, WaitInterval: 500 * time.Millisecond, Prune: true}
}

// Owner is converge's ssa.Owner.
var Owner = ssa.Owner{Field: FieldManager, Group: OwnerGroup}
