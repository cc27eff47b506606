package graph

import (
	"path/filepath"
	"reflect"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
)

// TestRenderCacheServesCopies renders the example twice: the second
// render comes from the cache, equals the first, and a change to the
// first result does not reach it.
func TestRenderCacheServesCopies(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := e.LoadConfig(filepath.Join("..", "..", "testdata", "example"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.Render(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.cache.order.Len(); n != 1 {
		t.Fatalf("%d cache entries after one render, want 1", n)
	}
	want, err := e.Render(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, want) {
		t.Fatal("the cached render differs from the first")
	}
	first.Nodes[0].Objects[0].SetName("changed")
	first.HyperConverged.SetLabels(map[string]string{"changed": "yes"})
	first.Health["Changed"] = "none"
	again, err := e.Render(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, want) {
		t.Fatal("a change to a render's result reached the cache")
	}
	if n := e.cache.order.Len(); n != 1 {
		t.Fatalf("%d cache entries after three renders of one config, want 1", n)
	}
	if _, err := e.Render(cfg, map[string]any{"workerNodes": 1}); err != nil {
		t.Fatal(err)
	}
	if n := e.cache.order.Len(); n != 2 {
		t.Fatalf("%d cache entries after a render with other facts, want 2", n)
	}
}

// TestRenderCacheEvicts keeps the most recently used entries only.
func TestRenderCacheEvicts(t *testing.T) {
	c := newRenderCache(2)
	r := &Rendered{Health: map[string]string{}, OwnedByHC: map[string]bool{}}
	has := func(c *renderCache, k byte) bool { _, ok := c.get([32]byte{k}); return ok }
	c.put([32]byte{1}, r)
	c.put([32]byte{2}, r)
	if !has(c, 1) {
		t.Fatal("entry 1 missing")
	}
	c.put([32]byte{3}, r) // evicts 2, the least recently used
	if has(c, 2) || !has(c, 1) || !has(c, 3) {
		t.Fatal("want entries 1 and 3 kept, 2 evicted")
	}
	none := newRenderCache(0)
	none.put([32]byte{1}, r)
	if has(none, 1) {
		t.Fatal("a cache of size 0 kept an entry")
	}
}

// TestRenderKey: a document that is plain data has a key, which changes
// with any field, value, kind of number, the HPP's presence or the facts;
// a document holding what its JSON form would hide has none.
func TestRenderKey(t *testing.T) {
	ctx := cuecontext.New()
	val := func(src string) cue.Value {
		t.Helper()
		v := ctx.CompileString(src)
		if v.Err() != nil {
			t.Fatal(v.Err())
		}
		return v
	}
	base := `apiVersion: "v", kind: "HyperConverged", spec: {a: 1, b: ["x", {c: true}], d: null}`
	key := func(src string, hpp cue.Value, facts map[string]any) ([32]byte, bool) {
		return renderKey([32]byte{}, val(src), hpp, facts)
	}
	k0, ok := key(base, cue.Value{}, nil)
	if !ok {
		t.Fatal("plain data has no key")
	}
	if k, _ := key(base, cue.Value{}, nil); k != k0 {
		t.Fatal("the same document gave two keys")
	}
	if k, _ := renderKey([32]byte{1}, val(base), cue.Value{}, nil); k == k0 {
		t.Error("another CUE module gave the same key")
	}
	for _, other := range []string{
		`apiVersion: "v", kind: "HyperConverged", spec: {a: 2, b: ["x", {c: true}], d: null}`,
		`apiVersion: "v", kind: "HyperConverged", spec: {a: 1.0, b: ["x", {c: true}], d: null}`,
		`apiVersion: "v", kind: "HyperConverged", spec: {a: "1", b: ["x", {c: true}], d: null}`,
		`apiVersion: "v", kind: "HyperConverged", spec: {a: 1, b: ["x", {c: false}], d: null}`,
		`apiVersion: "v", kind: "HyperConverged", spec: {a: 1, b: ["x"], d: null}`,
		`apiVersion: "v", kind: "HyperConverged", spec: {a: 1, b: ["x", {c: true}], e: null}`,
		`apiVersion: "v", kind: "HyperConverged", spec: {a: 1, b: ["x", {c: true}]}`,
	} {
		if k, ok := key(other, cue.Value{}, nil); !ok || k == k0 {
			t.Errorf("%s: key %v (ok %v), want a key of its own", other, k, ok)
		}
	}
	if k, _ := key(base, val(`kind: "HostPathProvisioner"`), nil); k == k0 {
		t.Error("an HPP did not change the key")
	}
	if k, _ := key(base, cue.Value{}, map[string]any{"workerNodes": 1}); k == k0 {
		t.Error("facts did not change the key")
	}
	for _, notData := range []string{
		`spec: {a: *1 | 2}`,
		`spec: {a: int}`,
		`spec: {a: 1, b?: 2}`,
		`spec: {a: 1, b!: 2}`,
		`spec: {a: 1, _b: 2}`,
		`spec: {a: 1, #B: 2}`,
		`spec: {[string]: int}`,
		`spec: close({a: 1})`,
		`spec: {a: [...int]}`,
		`spec: {a: [1, ...int]}`,
	} {
		if _, ok := key(notData, cue.Value{}, nil); ok {
			t.Errorf("%s: a key for a document that is not plain data", notData)
		}
	}
}
