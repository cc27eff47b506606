package reconciler

import (
	"bytes"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// withIgnored returns desired as converge applies it to the existing
// object live under the ignore rule paths (graph.IgnoreRule): a path live
// has no value at is left out; a path another field manager owns on live
// is left out (SSA then drops converge's ownership and keeps that
// manager's value); a path only converge owns takes live's value (so it
// is kept, not deleted, until someone else takes it over). desired is not
// modified. A malformed path is an error naming the object and the path.
func withIgnored(desired, live *unstructured.Unstructured, paths []string) (*unstructured.Unstructured, error) {
	out := desired.DeepCopy()
	sets, err := foreignFieldSets(live.GetManagedFields())
	if err != nil {
		return nil, fmt.Errorf("%s: managedFields: %w", ssaSubject(desired), err)
	}
	for _, ptr := range paths {
		parts, err := parsePointer(ptr)
		if err != nil {
			return nil, fmt.Errorf("%s: ignore rule: %w", ssaSubject(desired), err)
		}
		v, found, err := unstructured.NestedFieldNoCopy(live.Object, parts...)
		if err != nil || !found || ownedByAny(sets, parts) {
			removeField(out.Object, parts)
			continue
		}
		if err := unstructured.SetNestedField(out.Object, runtime.DeepCopyJSONValue(v), parts...); err != nil {
			return nil, fmt.Errorf("%s: ignore rule %s: %w", ssaSubject(desired), ptr, err)
		}
	}
	return out, nil
}

// removeField removes the field at parts and then every map above it
// that this left empty: an empty "annotations: {}" in an apply would
// still claim the map.
func removeField(obj map[string]any, parts []string) {
	if _, found, _ := unstructured.NestedFieldNoCopy(obj, parts...); !found {
		return
	}
	unstructured.RemoveNestedField(obj, parts...)
	for i := len(parts) - 1; i > 0; i-- {
		m, found, err := unstructured.NestedMap(obj, parts[:i]...)
		if err != nil || !found || len(m) > 0 {
			return
		}
		unstructured.RemoveNestedField(obj, parts[:i]...)
	}
}

// foreignFieldSets parses the field sets of every manager but converge's
// own apply, skipping subresources (status).
func foreignFieldSets(mfs []metav1.ManagedFieldsEntry) ([]*fieldpath.Set, error) {
	var out []*fieldpath.Set
	for _, mf := range mfs {
		if mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		if mf.Manager == FieldManager && mf.Operation == metav1.ManagedFieldsOperationApply {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(bytes.NewReader(mf.FieldsV1.Raw)); err != nil {
			return nil, fmt.Errorf("manager %s: %w", mf.Manager, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// ownedByAny reports whether one of sets owns the field at parts or
// anything below it.
func ownedByAny(sets []*fieldpath.Set, parts []string) bool {
	p := make(fieldpath.Path, len(parts))
	for i := range parts {
		name := parts[i]
		p[i] = fieldpath.PathElement{FieldName: &name}
	}
	for _, s := range sets {
		if s.Has(p) {
			return true
		}
		sub := s
		for _, pe := range p {
			sub = sub.WithPrefix(pe)
		}
		if !sub.Empty() {
			return true
		}
	}
	return false
}

// parsePointer splits an RFC 6901 JSON pointer into field names.
func parsePointer(ptr string) ([]string, error) {
	if !strings.HasPrefix(ptr, "/") || len(ptr) < 2 {
		return nil, fmt.Errorf("path %q: want a JSON pointer such as /spec/replicas", ptr)
	}
	parts := strings.Split(ptr[1:], "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts, nil
}
