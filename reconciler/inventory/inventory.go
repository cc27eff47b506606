// Package inventory records the set of objects converge applied for one
// HyperConverged: per object its identity, API version, the digest of the
// desired state and the resourceVersion the API server returned. Pure
// functions, in the manner of kustomize-controller's inventory.
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
)

// Entry is one applied object.
type Entry struct {
	// ID is "<namespace>_<name>_<group>_<kind>" (Flux's format; the
	// namespace is empty for cluster-scoped objects).
	ID string `json:"id"`
	// Version is the API version the object was applied with.
	Version string `json:"v"`
	// Digest is the sha256 of the desired object as applied.
	Digest string `json:"d,omitempty"`
	// ResourceVersion is the object's resourceVersion after the apply.
	ResourceVersion string `json:"rv,omitempty"`
	// Component is the graph component that derives the object (a
	// graph.Node name such as "virt", or "crds" for the generated CRDs);
	// empty in inventories written before converge recorded it.
	Component string `json:"c,omitempty"`
}

// Inventory is the applied set for one revision.
type Inventory struct {
	// Revision is the config revision the set was applied from.
	Revision string `json:"revision,omitempty"`
	// Entries are sorted by ID.
	Entries []Entry `json:"entries"`
}

// ID returns the inventory ID of u.
func ID(u *unstructured.Unstructured) string {
	return IDOf(u.GetNamespace(), u.GetName(), u.GroupVersionKind().GroupKind())
}

// IDOf returns the inventory ID of the object namespace/name of kind gk.
func IDOf(namespace, name string, gk schema.GroupKind) string {
	return strings.Join([]string{namespace, name, gk.Group, gk.Kind}, "_")
}

// Digest returns the sha256 (hex) of u's canonical JSON.
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

// Sort sorts entries by ID in place and returns inv.
func (inv *Inventory) Sort() *Inventory {
	sort.Slice(inv.Entries, func(i, j int) bool { return inv.Entries[i].ID < inv.Entries[j].ID })
	return inv
}

// Index returns the entries by ID.
func (inv *Inventory) Index() map[string]Entry {
	m := map[string]Entry{}
	if inv == nil {
		return m
	}
	for _, e := range inv.Entries {
		m[e.ID] = e
	}
	return m
}

// Stale returns the entries of old whose ID is not in next: the objects
// to prune. Either may be nil.
func Stale(old, next *Inventory) []Entry {
	if old == nil {
		return nil
	}
	keep := next.Index()
	var out []Entry
	for _, e := range old.Entries {
		if _, ok := keep[e.ID]; !ok {
			out = append(out, e)
		}
	}
	return out
}

// Object returns a skeleton unstructured object for e (apiVersion, kind,
// namespace, name), e.g. to delete it.
func (e Entry) Object() (*unstructured.Unstructured, error) {
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
