package graph

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestRolesCache derives the KubeVirt roles of one CR twice: the second
// comes from the cache, equals the first, and a change to the first does
// not reach it; what the definition does not see (status, managed fields)
// hits the cache, while a spec field, the namespace, an image or an input
// derives again; an error is not cached.
func TestRolesCache(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	cr := func(spec map[string]any, status string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
			"metadata": map[string]any{"name": "kubevirt", "namespace": "kv", "generation": int64(1),
				"annotations": map[string]any{"converge.dev/operator": "native"}},
			"spec":   spec,
			"status": map[string]any{"phase": status},
		}}
	}
	in := RoleInputs{Namespace: "kv", Images: map[string]string{"node": "n:1"}}
	first, err := e.Roles("KubeVirt", cr(map[string]any{}, "Deploying"), in)
	if err != nil {
		t.Fatal(err)
	}
	want := first.clone()
	first.Objects[0].SetName("changed-by-the-caller")
	second, err := e.Roles("KubeVirt", cr(map[string]any{}, "Deployed"), in)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.roles.order.Len(); n != 1 {
		t.Fatalf("%d cache entries after the same CR with another status, want 1", n)
	}
	if !reflect.DeepEqual(second, want) {
		t.Fatal("the cached derivation differs from the first, or the caller's change reached it")
	}

	for i, tc := range []struct {
		name string
		spec map[string]any
		in   RoleInputs
	}{
		{"a spec field", map[string]any{"imagePullPolicy": "Always"}, in},
		{"the namespace", map[string]any{}, RoleInputs{Namespace: "other", Images: in.Images}},
		{"an image", map[string]any{}, RoleInputs{Namespace: "kv", Images: map[string]string{"node": "n:2"}}},
		{"an input", map[string]any{}, RoleInputs{Namespace: "kv", Images: in.Images, Inputs: map[string]any{"pools": []any{map[string]any{"name": "local", "path": "/var/hpvolumes"}}}}},
	} {
		r, err := e.Roles("KubeVirt", cr(tc.spec, "Deployed"), tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n := e.roles.order.Len(); n != i+2 {
			t.Errorf("%s: %d cache entries, want %d (a new derivation)", tc.name, n, i+2)
		}
		if reflect.DeepEqual(r, want) {
			t.Errorf("%s: derived the same roles as before", tc.name)
		}
	}

	n := e.roles.order.Len()
	if _, err := e.Roles("KubeVirt", cr(map[string]any{"imagePullPolicy": 7}, "Deployed"), in); err == nil {
		t.Fatal("a CR with imagePullPolicy 7: want an error")
	}
	if m := e.roles.order.Len(); m != n {
		t.Errorf("a failed derivation was cached (%d entries, was %d)", m, n)
	}
}
