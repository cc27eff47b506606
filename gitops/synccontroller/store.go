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
// of the reconcile. Save therefore never reports a write.
type StatusStore struct {
	Sync *v1alpha1.Sync
}

var _ reconciler.InventoryStore = StatusStore{}

// Load implements reconciler.InventoryStore: status.inventory as an
// inventory.Inventory whose Revision is status.lastAppliedRevision, or nil
// when the Sync has none.
func (s StatusStore) Load(context.Context) (*inventory.Inventory, error) {
	return ToInventory(s.Sync.Status.Inventory, s.Sync.Status.LastAppliedRevision), nil
}

// Save implements reconciler.InventoryStore: it sets status.inventory to
// inv (sorted) and reports false, since nothing was written yet.
func (s StatusStore) Save(_ context.Context, _, inv *inventory.Inventory) (bool, error) {
	s.Sync.Status.Inventory = FromInventory(inv)
	return false, nil
}

// ToInventory converts a status inventory to package inventory's (every
// field, the component included), with the given revision; nil gives nil.
func ToInventory(in *v1alpha1.Inventory, revision string) *inventory.Inventory {
	if in == nil {
		return nil
	}
	out := &inventory.Inventory{Revision: revision, Entries: make([]inventory.Entry, 0, len(in.Entries))}
	for _, e := range in.Entries {
		out.Entries = append(out.Entries, inventory.Entry{ID: e.ID, Version: e.Version, Digest: e.Digest, ResourceVersion: e.ResourceVersion, Component: e.Component})
	}
	return out.Sort()
}

// FromInventory converts package inventory's Inventory to the status
// form (every field, the component included; entries sorted by ID); nil
// gives nil.
func FromInventory(in *inventory.Inventory) *v1alpha1.Inventory {
	if in == nil {
		return nil
	}
	in.Sort()
	out := &v1alpha1.Inventory{Entries: make([]v1alpha1.InventoryEntry, 0, len(in.Entries))}
	for _, e := range in.Entries {
		out.Entries = append(out.Entries, v1alpha1.InventoryEntry{ID: e.ID, Version: e.Version, Digest: e.Digest, ResourceVersion: e.ResourceVersion, Component: e.Component})
	}
	return out
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
