// Package inventory works on the inventory of the apply pipeline: the set
// of objects converge applied for one HyperConverged, per object its
// identity, API version, the digest of the desired state, the
// resourceVersion the API server returned and the graph component that
// derives it. The inventory is the Sync API's type, v1alpha1.Inventory
// (a Sync's status.inventory; `converge apply` keeps the same entries in
// a ConfigMap, see reconciler.ConfigMapStore); this package is pure
// functions on it, as fluxcd/kustomize-controller's internal/inventory
// works on its API's ResourceInventory.
package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// ID returns the inventory ID of u: "<namespace>_<name>_<group>_<kind>"
// (Flux's format; the namespace is empty for cluster-scoped objects).
func ID(u *unstructured.Unstructured) string {
	return IDOf(u.GetNamespace(), u.GetName(), u.GroupVersionKind().GroupKind())
}

// IDOf returns the inventory ID of the object namespace/name of kind gk.
func IDOf(namespace, name string, gk schema.GroupKind) string {
	return strings.Join([]string{namespace, name, gk.Group, gk.Kind}, "_")
}

// Digest returns the sha256 (hex) of u's canonical JSON, the Digest of
// its inventory entry.
func Digest(u *unstructured.Unstructured) string {
	b, err := json.Marshal(u.Object) // map keys are sorted: canonical
	if err != nil {
		panic(fmt.Sprintf("inventory: object %s is not JSON: %v", ID(u), err))
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ParseID splits an ID into namespace, name and GroupKind.
func ParseID(id string) (ns, name string, gk schema.GroupKind, err error) {
	p := strings.Split(id, "_")
	if len(p) != 4 {
		return "", "", gk, fmt.Errorf("inventory: malformed ID %q: want <namespace>_<name>_<group>_<kind>", id)
	}
	return p[0], p[1], schema.GroupKind{Group: p[2], Kind: p[3]}, nil
}

// Sort sorts the entries of inv by ID in place and returns inv (nil
// stays nil).
func Sort(inv *v1alpha1.Inventory) *v1alpha1.Inventory {
	if inv != nil {
		sort.Slice(inv.Entries, func(i, j int) bool { return inv.Entries[i].ID < inv.Entries[j].ID })
	}
	return inv
}

// Index returns the entries of inv by ID; an empty map for nil.
func Index(inv *v1alpha1.Inventory) map[string]v1alpha1.InventoryEntry {
	m := map[string]v1alpha1.InventoryEntry{}
	if inv == nil {
		return m
	}
	for _, e := range inv.Entries {
		m[e.ID] = e
	}
	return m
}

// Stale returns the entries of old whose ID is not in next, in old's
// order: the objects to prune. Either may be nil.
func Stale(old, next *v1alpha1.Inventory) []v1alpha1.InventoryEntry {
	if old == nil {
		return nil
	}
	keep := Index(next)
	var out []v1alpha1.InventoryEntry
	for _, e := range old.Entries {
		if _, ok := keep[e.ID]; !ok {
			out = append(out, e)
		}
	}
	return out
}

// Object returns a skeleton unstructured object for e (apiVersion, kind,
// namespace, name), e.g. to read or delete it; an error for a malformed
// ID.
func Object(e v1alpha1.InventoryEntry) (*unstructured.Unstructured, error) {
	ns, name, gk, err := ParseID(e.ID)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gk.WithVersion(versionOf(e.Version)))
	u.SetNamespace(ns)
	u.SetName(name)
	return u, nil
}

// versionOf returns the version part of an apiVersion ("apps/v1" → "v1").
func versionOf(apiVersion string) string {
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		return apiVersion[i+1:]
	}
	return apiVersion
}
