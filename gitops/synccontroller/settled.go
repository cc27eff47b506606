package synccontroller

import (
	"time"

	"github.com/converge-dev/converge/gitops/source"
)

// settledSync is what a status refresh of a Sync stands on: its last
// reconcile that applied every stage of a rendering into a target.
type settledSync struct {
	// generation is the Sync's generation that reconcile applied.
	generation int64
	// artifact is the revision fetched, rendering its rendering.
	artifact  source.Artifact
	rendering rendering
	// target is the target it applied into (a rebuilt target is another).
	target *target
	// at is when that reconcile began: the interval counts from it.
	at time.Time
}
