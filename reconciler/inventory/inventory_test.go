package inventory

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/api/v1alpha1"
)

func obj(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func TestIDRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		u  *unstructured.Unstructured
		id string
	}{
		{obj("kubevirt.io/v1", "KubeVirt", "kubevirt-hyperconverged", "kv"), "kubevirt-hyperconverged_kv_kubevirt.io_KubeVirt"},
		{obj("v1", "Namespace", "", "ns"), "_ns__Namespace"},
		{obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "cdis.cdi.kubevirt.io"), "_cdis.cdi.kubevirt.io_apiextensions.k8s.io_CustomResourceDefinition"},
	} {
		if got := ID(tc.u); got != tc.id {
			t.Errorf("ID = %q, want %q", got, tc.id)
		}
		back, err := Object(v1alpha1.InventoryEntry{ID: tc.id, Version: tc.u.GetAPIVersion()})
		if err != nil {
			t.Fatal(err)
		}
		if back.GroupVersionKind() != tc.u.GroupVersionKind() || back.GetNamespace() != tc.u.GetNamespace() || back.GetName() != tc.u.GetName() {
			t.Errorf("Object(%q) = %v %s/%s, want %v %s/%s", tc.id, back.GroupVersionKind(), back.GetNamespace(), back.GetName(),
				tc.u.GroupVersionKind(), tc.u.GetNamespace(), tc.u.GetName())
		}
	}
	if _, _, _, err := ParseID("a_b_c"); err == nil {
		t.Error("ParseID accepted an ID with three parts")
	}
}

func TestStale(t *testing.T) {
	inv := func(ids ...string) *v1alpha1.Inventory {
		i := &v1alpha1.Inventory{}
		for _, id := range ids {
			i.Entries = append(i.Entries, v1alpha1.InventoryEntry{ID: id})
		}
		return i
	}
	for _, tc := range []struct {
		name      string
		old, next *v1alpha1.Inventory
		want      []string
	}{
		{"no previous inventory", nil, inv("a_b_c_d"), nil},
		{"nothing left", inv("a_b_c_d"), inv("a_b_c_d", "e_f_g_h"), nil},
		{"one left", inv("a_b_c_d", "e_f_g_h"), inv("e_f_g_h"), []string{"a_b_c_d"}},
		{"everything left", inv("a_b_c_d"), nil, []string{"a_b_c_d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Stale(tc.old, tc.next)
			if len(got) != len(tc.want) {
				t.Fatalf("Stale = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i].ID != tc.want[i] {
					t.Errorf("Stale[%d] = %s, want %s", i, got[i].ID, tc.want[i])
				}
			}
		})
	}
}

func TestDigest(t *testing.T) {
	a := obj("v1", "ConfigMap", "ns", "x")
	b := obj("v1", "ConfigMap", "ns", "x")
	if Digest(a) != Digest(b) {
		t.Error("equal objects have different digests")
	}
	b.SetLabels(map[string]string{"k": "v"})
	if Digest(a) == Digest(b) {
		t.Error("a label change did not change the digest")
	}
}

// TestEntryJSON pins the short JSON keys of an entry (the status and the
// inventory ConfigMap use them) and that an entry without a component,
// as older controllers wrote, reads back with an empty one.
func TestEntryJSON(t *testing.T) {
	e := v1alpha1.InventoryEntry{ID: "ns_kv_kubevirt.io_KubeVirt", Version: "kubevirt.io/v1", Digest: "abc", ResourceVersion: "12", Component: "virt"}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"ns_kv_kubevirt.io_KubeVirt","v":"kubevirt.io/v1","d":"abc","rv":"12","c":"virt"}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var old v1alpha1.InventoryEntry
	if err := json.Unmarshal([]byte(`{"id":"a_b_c_d","v":"v1"}`), &old); err != nil || old.Component != "" || old.ID != "a_b_c_d" {
		t.Errorf("old entry read as %+v (%v)", old, err)
	}
}

// TestSortIndex sorts an inventory by ID in place and indexes it; a nil
// inventory sorts to nil and indexes to an empty map.
func TestSortIndex(t *testing.T) {
	inv := &v1alpha1.Inventory{Entries: []v1alpha1.InventoryEntry{{ID: "b_x__ConfigMap", Version: "v1"}, {ID: "_a__Namespace", Version: "v1"}}}
	if got := Sort(inv); got != inv || inv.Entries[0].ID != "_a__Namespace" || inv.Entries[1].ID != "b_x__ConfigMap" {
		t.Errorf("Sort = %+v, want the same inventory sorted by ID", got)
	}
	if idx := Index(inv); len(idx) != 2 || idx["b_x__ConfigMap"].Version != "v1" {
		t.Errorf("Index = %+v", idx)
	}
	if Sort(nil) != nil || len(Index(nil)) != 0 {
		t.Error("nil inventory: Sort or Index not nil-safe")
	}
}
