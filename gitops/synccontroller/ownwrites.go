package synccontroller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// ownWrites tells the drift watch's events caused by a Sync's own apply
// from everyone else's, so that one commit gives one reconcile: the
// watch of an object converge just patched would otherwise enqueue the
// Sync again, for a reconcile with nothing to do.
//
// An apply reports each write it makes (wrote: the object's inventory ID
// and the resourceVersion the API server returned). When it ends, the
// Sync's own versions are those writes plus its inventory's versions. An
// event is the Sync's own when it carries one of them for that ID; a
// deletion is its own when the ID has left its inventory (prune). While
// an apply runs, the Sync's events are held and judged when it ends.
//
// The zero value is not usable; newOwnWrites gives one. Safe for
// concurrent use.
type ownWrites struct {
	mu sync.Mutex
	// own are the (ID, resourceVersion) pairs of the Sync's last apply;
	// ids the IDs of its inventory.
	own map[types.NamespacedName]map[ownEvent]bool
	ids map[types.NamespacedName]map[string]bool
	// writes are those of the apply running; held the events seen
	// meanwhile. A Sync applying has a non-nil writes entry.
	writes map[types.NamespacedName]map[ownEvent]bool
	held   map[types.NamespacedName][]ownEvent
}

// ownEvent is one watch event, or one write: the inventory ID of the
// object, its resourceVersion, whether it was a deletion, and whether it
// changed only the object's status (statusOnly; never for a write).
type ownEvent struct {
	id, version string
	deleted     bool
	statusOnly  bool
}

func newOwnWrites() *ownWrites {
	return &ownWrites{own: map[types.NamespacedName]map[ownEvent]bool{}, ids: map[types.NamespacedName]map[string]bool{},
		writes: map[types.NamespacedName]map[ownEvent]bool{}, held: map[types.NamespacedName][]ownEvent{}}
}

// begin marks sync as applying: its events are held until end.
func (w *ownWrites) begin(sync types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes[sync] = map[ownEvent]bool{}
	w.held[sync] = nil
}

// wrote records a write of sync's running apply: the object id now has
// resourceVersion version. Outside an apply it does nothing.
func (w *ownWrites) wrote(sync types.NamespacedName, id, version string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ws := w.writes[sync]; ws != nil {
		ws[ownEvent{id: id, version: version}] = true
	}
}

// end ends sync's apply: its own versions become the writes recorded
// since begin plus the entries of inv (the inventory saved). An apply
// that saved none (inv nil: it failed before) adds its writes to what
// the last one left and keeps that inventory's IDs, so a deletion of an
// object applied before still counts as drift. It returns true when an
// event held meanwhile was not sync's own (after a failed apply: any
// event held): the caller must reconcile sync again; statusOnly is true
// when every such event was a status-only change.
func (w *ownWrites) end(sync types.NamespacedName, inv *v1alpha1.Inventory) (foreign, statusOnly bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	own := w.writes[sync]
	if own == nil {
		own = map[ownEvent]bool{}
	}
	if inv == nil {
		for ev := range w.own[sync] {
			own[ev] = true
		}
		w.own[sync] = own
		statusOnly = true
		for _, ev := range w.held[sync] {
			foreign, statusOnly = true, statusOnly && ev.statusOnly
		}
		delete(w.writes, sync)
		delete(w.held, sync)
		return foreign, foreign && statusOnly
	}
	ids := map[string]bool{}
	for _, e := range inv.Entries {
		own[ownEvent{id: e.ID, version: e.ResourceVersion}] = true
		ids[e.ID] = true
	}
	w.own[sync], w.ids[sync] = own, ids
	statusOnly = true
	for _, ev := range w.held[sync] {
		if w.isForeign(sync, ev) {
			foreign, statusOnly = true, statusOnly && ev.statusOnly
		}
	}
	delete(w.writes, sync)
	delete(w.held, sync)
	return foreign, foreign && statusOnly
}

// foreign reports whether ev must enqueue sync now: never while sync
// applies (ev is held for end), otherwise when it is not sync's own.
func (w *ownWrites) foreign(sync types.NamespacedName, ev ownEvent) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, applying := w.writes[sync]; applying {
		w.held[sync] = append(w.held[sync], ev)
		return false
	}
	return w.isForeign(sync, ev)
}

// isForeign judges ev against sync's last apply; w.mu is held.
func (w *ownWrites) isForeign(sync types.NamespacedName, ev ownEvent) bool {
	if ev.deleted {
		return w.ids[sync][ev.id]
	}
	return !w.own[sync][ownEvent{id: ev.id, version: ev.version}]
}

// forget drops what is kept for sync (deleted, or moved to another
// target).
func (w *ownWrites) forget(sync types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.own, sync)
	delete(w.ids, sync)
	delete(w.writes, sync)
	delete(w.held, sync)
}
