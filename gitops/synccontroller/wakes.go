package synccontroller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// wakes records why each Sync was enqueued since its last reconcile
// began, as far as a status refresh cares: whether every reason was a
// status-only change of an object it applied (statusOnly). The drift
// watch, Trigger, a Secret or a dependency marks a Sync before it
// enqueues it; Reconcile takes the marks when it begins. Reasons nobody
// marks (the Sync's own spec or reconcile request, a requeue) are told
// by Reconcile from the Sync itself and the time.
//
// The zero value is not usable; newWakes gives one. Safe for concurrent
// use.
type wakes struct {
	mu sync.Mutex
	// full is true for a Sync enqueued for anything but a status-only
	// change since its marks were last taken; a Sync absent has no mark.
	full map[types.NamespacedName]bool
}

func newWakes() *wakes { return &wakes{full: map[types.NamespacedName]bool{}} }

// mark records a reason to reconcile sync: a status-only change or not.
func (w *wakes) mark(sync types.NamespacedName, statusOnly bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.full[sync] = w.full[sync] || !statusOnly
}

// take returns, and forgets, sync's marks: statusOnly is true when there
// was at least one and every one was a status-only change.
func (w *wakes) take(sync types.NamespacedName) (statusOnly bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	full, ok := w.full[sync]
	delete(w.full, sync)
	return ok && !full
}
