package synccontroller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// unsettled records the Syncs whose last apply into a target failed, or
// whose status (holding the inventory the apply saved) could not be
// written afterwards (targets.unsettle).
// Such an apply may have written what it never heard back about — a
// delete whose response an API server restart lost — and the target's
// cache, until its informers relist, can still hold the object at the
// resourceVersion the inventory recorded. The next apply of such a Sync
// therefore reads the live state from the API server
// (reconciler.Input.LiveReader), at one LIST per kind, instead of
// skipping an object that is gone; after a successful apply the cache is
// trusted again.
//
// The zero value is not usable; newUnsettled gives one. Safe for
// concurrent use.
type unsettled struct {
	mu    sync.Mutex
	syncs map[types.NamespacedName]bool
}

func newUnsettled() *unsettled { return &unsettled{syncs: map[types.NamespacedName]bool{}} }

// applied records how sync's apply ended: failed (an error from
// reconciler.Pipeline.Sync) or not.
func (u *unsettled) applied(sync types.NamespacedName, failed bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if failed {
		u.syncs[sync] = true
	} else {
		delete(u.syncs, sync)
	}
}

// is reports whether sync's last apply failed.
func (u *unsettled) is(sync types.NamespacedName) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.syncs[sync]
}
