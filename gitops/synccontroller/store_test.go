package synccontroller_test

import (
	"reflect"
	"testing"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/synccontroller"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// TestInventoryConversion converts a status inventory to package
// inventory's and back: every field, the component included, survives,
// entries come out sorted, and nil stays nil.
func TestInventoryConversion(t *testing.T) {
	status := &v1alpha1.Inventory{Entries: []v1alpha1.InventoryEntry{
		{ID: "ns_kv_kubevirt.io_KubeVirt", Version: "kubevirt.io/v1", Digest: "d2", ResourceVersion: "12", Component: "virt"},
		{ID: "_kubevirts.kubevirt.io_apiextensions.k8s.io_CustomResourceDefinition", Version: "apiextensions.k8s.io/v1", Digest: "d1", ResourceVersion: "7", Component: "crds"},
		{ID: "ns_old__ConfigMap", Version: "v1"},
	}}
	inv := synccontroller.ToInventory(status, "main@sha1:1")
	want := &inventory.Inventory{Revision: "main@sha1:1", Entries: []inventory.Entry{
		{ID: "_kubevirts.kubevirt.io_apiextensions.k8s.io_CustomResourceDefinition", Version: "apiextensions.k8s.io/v1", Digest: "d1", ResourceVersion: "7", Component: "crds"},
		{ID: "ns_kv_kubevirt.io_KubeVirt", Version: "kubevirt.io/v1", Digest: "d2", ResourceVersion: "12", Component: "virt"},
		{ID: "ns_old__ConfigMap", Version: "v1"},
	}}
	if !reflect.DeepEqual(inv, want) {
		t.Errorf("ToInventory = %+v, want %+v", inv, want)
	}
	back := synccontroller.FromInventory(inv)
	if len(back.Entries) != 3 || back.Entries[0] != status.Entries[1] || back.Entries[1] != status.Entries[0] || back.Entries[2] != status.Entries[2] {
		t.Errorf("FromInventory(ToInventory(x)) = %+v, want the entries of %+v sorted by ID", back, status)
	}
	if synccontroller.ToInventory(nil, "r") != nil || synccontroller.FromInventory(nil) != nil {
		t.Error("nil inventory did not convert to nil")
	}
}
