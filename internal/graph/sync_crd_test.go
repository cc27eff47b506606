package graph

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSyncCRD(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := e.SyncCRD()
	if err != nil {
		t.Fatal(err)
	}
	if crd.GetName() != "syncs.converge.dev" {
		t.Errorf("name %q", crd.GetName())
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 {
		t.Fatalf("versions: %v", versions)
	}
	v := versions[0].(map[string]any)
	for _, path := range [][]string{
		{"schema", "openAPIV3Schema", "properties", "spec", "properties", "source", "properties", "url"},
		{"schema", "openAPIV3Schema", "properties", "spec", "properties", "deletionPolicy"},
		{"schema", "openAPIV3Schema", "properties", "status", "properties", "inventory"},
		{"schema", "openAPIV3Schema", "properties", "status", "properties", "webhookPath"},
		{"subresources", "status"},
	} {
		if _, ok, _ := unstructured.NestedFieldNoCopy(v, path...); !ok {
			t.Errorf("CRD lacks %v", path)
		}
	}
	if def, _, _ := unstructured.NestedFieldNoCopy(v, "schema", "openAPIV3Schema", "properties", "spec", "properties", "prune", "default"); def != true {
		t.Errorf("spec.prune default = %v, want true", def)
	}
}
