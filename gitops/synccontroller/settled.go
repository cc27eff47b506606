package synccontroller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

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

// settledSyncs keeps each Sync's settledSync; safe for concurrent use.
type settledSyncs struct {
	mu   sync.Mutex
	last map[types.NamespacedName]settledSync
}

func (ss *settledSyncs) get(k types.NamespacedName) (settledSync, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.last[k]
	return s, ok
}

func (ss *settledSyncs) put(k types.NamespacedName, s settledSync) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.last == nil {
		ss.last = map[types.NamespacedName]settledSync{}
	}
	ss.last[k] = s
}

func (ss *settledSyncs) forget(k types.NamespacedName) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.last, k)
}
