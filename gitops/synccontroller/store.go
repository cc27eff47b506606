package synccontroller

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/reconciler"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// StatusStore is the reconciler.InventoryStore of a Sync: it keeps the
// inventory in Sync.Status.Inventory of the object it points to, in
// memory; the Reconciler writes it with the rest of the status at the end
// of the reconcile. Save therefore never reports a write. SaveAhead, the
// record of the objects a sync is about to create, is written at once
// through Write.
type StatusStore struct {
	Sync *v1alpha1.Sync
	// Write writes the Sync's status as it is in memory now; nil writes
	// nothing (SaveAhead is then Save).
	Write func(context.Context) error
}

var _ reconciler.AheadStore = StatusStore{}

// SaveAhead implements reconciler.AheadStore: Save, then Write.
func (s StatusStore) SaveAhead(ctx context.Context, prev, next reconciler.StoredInventory) (bool, error) {
	if _, err := s.Save(ctx, prev, next); err != nil || s.Write == nil {
		return false, err
	}
	if err := s.Write(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// Load implements reconciler.InventoryStore: a copy of status.inventory
// (entries sorted by ID) with the revision status.lastAppliedRevision, or
// no inventory when the Sync has none.
func (s StatusStore) Load(context.Context) (reconciler.StoredInventory, error) {
	return reconciler.StoredInventory{
		Inventory: inventory.Sort(s.Sync.Status.Inventory.DeepCopy()),
		Revision:  s.Sync.Status.LastAppliedRevision,
	}, nil
}

// Save implements reconciler.InventoryStore: it sets status.inventory to
// a copy of next's inventory, entries sorted by ID (never null: an empty
// inventory is "entries: []"), and reports false, since nothing was
// written yet. The revision is not kept here: the Reconciler sets
// status.lastAppliedRevision once the revision is applied and healthy.
func (s StatusStore) Save(_ context.Context, _, next reconciler.StoredInventory) (bool, error) {
	if next.Inventory == nil {
		s.Sync.Status.Inventory = nil
		return false, nil
	}
	inv := &v1alpha1.Inventory{Entries: make([]v1alpha1.InventoryEntry, 0, len(next.Inventory.Entries))}
	inv.Entries = append(inv.Entries, next.Inventory.Entries...)
	s.Sync.Status.Inventory = inventory.Sort(inv)
	return false, nil
}

// inventoryHC returns the HyperConverged the inventory holds (the owner of
// every object in it), or a zero name when it holds none.
func inventoryHC(inv *v1alpha1.Inventory) types.NamespacedName {
	if inv == nil {
		return types.NamespacedName{}
	}
	for _, e := range inv.Entries {
		ns, name, gk, err := inventory.ParseID(e.ID)
		if err == nil && gk.Group == "hco.kubevirt.io" && gk.Kind == "HyperConverged" {
			return types.NamespacedName{Namespace: ns, Name: name}
		}
	}
	return types.NamespacedName{}
}
