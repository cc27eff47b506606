package reconciler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// AheadStore is an InventoryStore whose Save only changes what its owner
// writes later (a Sync's status, written at the end of the reconcile).
// The record of the objects a sync is about to create (see ahead) must be
// stored before they are created, so the Pipeline saves it with SaveAhead
// when the store has it, and with Save otherwise.
type AheadStore interface {
	InventoryStore
	// SaveAhead stores next at once; it reports whether it wrote.
	SaveAhead(ctx context.Context, prev, next StoredInventory) (bool, error)
}

// ahead is the write-ahead record of one sync: before the first object
// the previous inventory lacks is applied, the inventory is saved with an
// entry (API version and component, no digest) for every rendered object
// it lacks, under the previous revision. A sync that creates objects and
// then cannot save its inventory at the end (the API server or etcd gone,
// the process killed) thus leaves them recorded, and the next sync prunes
// those its config no longer holds; without the record they would carry
// converge's owner labels with no inventory entry, and prune never
// deletes such an object. An entry without a digest is always applied,
// never taken for drift, and pruned as any other (an object never created
// is simply not found). A sync that creates nothing new writes nothing
// more.
//
// A store that cannot hold anything yet (the ConfigMap of `converge
// apply` whose namespace the same sync creates: NotFound) is tried again
// before the next batch with new objects: only the objects applied before
// the namespace exists (a first apply's CRDs, the Namespace itself) go
// unrecorded until then. A NamespacedStore whose namespace is among the
// objects to create is not even tried until the batch holding that
// Namespace was applied (the API server would hold the write ~50 ms to
// refuse it); so it is for a namespace that exists but the previous
// inventory lacks.
type ahead struct {
	store   InventoryStore
	prev    StoredInventory
	pending map[string]v1alpha1.InventoryEntry // rendered objects prev lacks, by ID
	// saved is what the store holds: prev, or prev plus pending once
	// recorded.
	saved  StoredInventory
	done   bool
	writes int
	// storeNS is the inventory ID of the NamespacedStore's Namespace
	// while that Namespace is pending and its batch not reached yet.
	storeNS string
}

func newAhead(store InventoryStore, prev StoredInventory, r *graph.Rendered) *ahead {
	a := &ahead{store: store, prev: prev, saved: prev, pending: map[string]v1alpha1.InventoryEntry{}}
	had := inventory.Index(prev.Inventory)
	comps := objectComponents(r)
	for _, o := range r.Objects() {
		id := inventory.ID(o)
		if _, ok := had[id]; !ok {
			a.pending[id] = v1alpha1.InventoryEntry{ID: id, Version: o.GetAPIVersion(), Component: comps[id]}
		}
	}
	if ns, ok := store.(NamespacedStore); ok {
		id := inventory.IDOf("", ns.StoreNamespace(), schema.GroupKind{Kind: "Namespace"})
		if _, ok := a.pending[id]; ok {
			a.storeNS = id
		}
	}
	return a
}

// before records the pending entries when objs, a batch about to be
// applied, holds one and they are not recorded yet.
func (a *ahead) before(ctx context.Context, objs []*unstructured.Unstructured) error {
	if a == nil || a.done || len(a.pending) == 0 {
		return nil
	}
	if a.storeNS != "" { // not before the batch creating it: tried at the next
		for _, o := range objs {
			if inventory.ID(o) == a.storeNS {
				a.storeNS = ""
			}
		}
		return nil
	}
	creates := false
	for _, o := range objs {
		if _, ok := a.pending[inventory.ID(o)]; ok {
			creates = true
			break
		}
	}
	if !creates {
		return nil
	}
	add := &v1alpha1.Inventory{}
	for _, e := range a.pending {
		add.Entries = append(add.Entries, e)
	}
	next := StoredInventory{Inventory: mergeInventory(a.prev.Inventory, add), Revision: a.prev.Revision}
	var wrote bool
	var err error
	if s, ok := a.store.(AheadStore); ok {
		wrote, err = s.SaveAhead(ctx, a.prev, next)
	} else {
		wrote, err = a.store.Save(ctx, a.prev, next)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("recording the objects to create in the inventory before creating them: %w", err)
	}
	if wrote {
		a.writes++
	}
	a.done, a.saved = true, next
	return nil
}

// base is the inventory a failed apply's entries are merged into: the
// record once saved (objects whose apply was sent but not answered may
// exist), else the previous inventory.
func (a *ahead) base(prev *v1alpha1.Inventory) *v1alpha1.Inventory {
	if a == nil || !a.done {
		return prev
	}
	return a.saved.Inventory
}
