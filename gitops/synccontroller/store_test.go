package synccontroller_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/synccontroller"
	"github.com/converge-dev/converge/reconciler"
)

// TestStatusStore loads a Sync's status.inventory through StatusStore and
// saves it back: every field, the component included, survives; the
// loaded inventory is a sorted copy carrying status.lastAppliedRevision;
// saving sorts, copies, writes nothing and keeps an empty inventory as
// "entries: []"; no inventory loads and saves as none.
func TestStatusStore(t *testing.T) {
	ctx := context.Background()
	s := &v1alpha1.Sync{Status: v1alpha1.SyncStatus{LastAppliedRevision: "main@sha1:1", Inventory: &v1alpha1.Inventory{Entries: []v1alpha1.InventoryEntry{
		{ID: "ns_kv_kubevirt.io_KubeVirt", Version: "kubevirt.io/v1", Digest: "d2", ResourceVersion: "12", Component: "virt"},
		{ID: "_kubevirts.kubevirt.io_apiextensions.k8s.io_CustomResourceDefinition", Version: "apiextensions.k8s.io/v1", Digest: "d1", ResourceVersion: "7", Component: "crds"},
		{ID: "ns_old__ConfigMap", Version: "v1"},
	}}}}
	store := synccontroller.StatusStore{Sync: s}
	got, err := store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.InventoryEntry{s.Status.Inventory.Entries[1], s.Status.Inventory.Entries[0], s.Status.Inventory.Entries[2]}
	if got.Revision != "main@sha1:1" || !reflect.DeepEqual(got.Inventory.Entries, want) {
		t.Errorf("Load = %q %+v, want main@sha1:1 and the entries sorted by ID %+v", got.Revision, got.Inventory, want)
	}
	if &got.Inventory.Entries[0] == &s.Status.Inventory.Entries[0] || s.Status.Inventory.Entries[0].ID != "ns_kv_kubevirt.io_KubeVirt" {
		t.Error("Load sorted or shared the status inventory instead of a copy")
	}

	next := reconciler.StoredInventory{Revision: "main@sha1:2", Inventory: &v1alpha1.Inventory{Entries: []v1alpha1.InventoryEntry{want[2], want[0]}}}
	if wrote, err := store.Save(ctx, got, next); err != nil || wrote {
		t.Errorf("Save = %v, %v; want no write reported", wrote, err)
	}
	if !reflect.DeepEqual(s.Status.Inventory.Entries, []v1alpha1.InventoryEntry{want[0], want[2]}) || s.Status.Inventory == next.Inventory {
		t.Errorf("status.inventory after Save = %+v, want a sorted copy of %+v", s.Status.Inventory, next.Inventory)
	}
	if s.Status.LastAppliedRevision != "main@sha1:1" {
		t.Errorf("Save changed status.lastAppliedRevision to %q", s.Status.LastAppliedRevision)
	}

	if _, err := store.Save(ctx, next, reconciler.StoredInventory{Inventory: &v1alpha1.Inventory{}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(s.Status.Inventory); string(b) != `{"entries":[]}` {
		t.Errorf("empty inventory saved as %s, want {\"entries\":[]}", b)
	}

	empty := synccontroller.StatusStore{Sync: &v1alpha1.Sync{}}
	if got, err := empty.Load(ctx); err != nil || got.Inventory != nil {
		t.Errorf("Load of a Sync without inventory = %+v, %v; want none", got, err)
	}
}
