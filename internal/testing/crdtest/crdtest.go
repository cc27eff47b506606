// Package crdtest installs the CRDs converge's graph generates into a test's
// API server, so that tests of the controllers and agents run against the
// same schemas a Sync installs.
package crdtest

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/crdwait"
	"github.com/converge-dev/converge/internal/graph"
)

// Install takes a test, a client and CRD plurals as the graph names them
// ("virtualmachines", "datavolumes", …), applies those CRDs of
// graph.NewEngine().CRDs() with server-side apply and waits up to 30 s
// until each is established and c's REST mapper resolves its kind (the API
// server's discovery can lag behind the Established condition, and a
// client that asks in between gets "no matches for kind"). It fails the
// test when a plural is not among the graph's CRDs or a CRD is refused.
func Install(t testing.TB, c client.Client, plurals ...string) {
	t.Helper()
	engine, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := engine.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var names []string
	var kinds []schema.GroupKind
	for _, crd := range crds {
		if !slices.Contains(plurals, crd.Name) {
			continue
		}
		if err := c.Patch(ctx, crd.Object, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Fatalf("installing CRD %s: %v", crd.Object.GetName(), err)
		}
		names = append(names, crd.Object.GetName())
		group, _, _ := unstructured.NestedString(crd.Object.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object.Object, "spec", "names", "kind")
		kinds = append(kinds, schema.GroupKind{Group: group, Kind: kind})
	}
	if len(names) != len(plurals) {
		t.Fatalf("the graph generates %d of the CRDs %v (found %v)", len(names), plurals, names)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !crdwait.Wait(wctx, c, 50*time.Millisecond, names...) {
		t.Fatalf("CRDs %v not established within 30s", names)
	}
	for _, gk := range kinds {
		waitServed(wctx, t, c, gk)
	}
}

// Apply takes a test, a client and a CRD (one Install would not give
// as is: a test's variant of the graph's), applies it with server-side
// apply, waits up to 30 s until it is established and c's REST mapper
// resolves its kind in every version it serves, and gives those versions.
func Apply(t testing.TB, c client.Client, crd *unstructured.Unstructured) []string {
	t.Helper()
	ctx := context.Background()
	if err := c.Patch(ctx, crd, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
		t.Fatalf("installing CRD %s: %v", crd.GetName(), err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !crdwait.Wait(wctx, c, 50*time.Millisecond, crd.GetName()) {
		t.Fatalf("CRD %s not established within 30s", crd.GetName())
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	vs, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var versions []string
	for _, v := range vs {
		if m, ok := v.(map[string]any); ok && m["served"] == true {
			versions = append(versions, m["name"].(string))
		}
	}
	waitServed(wctx, t, c, schema.GroupKind{Group: group, Kind: kind}, versions...)
	return versions
}

// waitServed waits until c's REST mapper resolves gk, in each of versions
// when given (the API server's discovery can lag behind a CRD's
// Established condition, and a client that asks in between gets "no
// matches for kind"); it fails t when ctx ends first.
func waitServed(ctx context.Context, t testing.TB, c client.Client, gk schema.GroupKind, versions ...string) {
	t.Helper()
	for {
		err := mapped(c, gk, versions)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD of %s established, but discovery does not serve it in time: %v", gk, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// mapped is nil once c's REST mapper resolves gk in every version (in
// any, for none).
func mapped(c client.Client, gk schema.GroupKind, versions []string) error {
	if len(versions) == 0 {
		_, err := c.RESTMapper().RESTMapping(gk)
		return err
	}
	for _, v := range versions {
		if _, err := c.RESTMapper().RESTMapping(gk, v); err != nil {
			return err
		}
	}
	return nil
}
