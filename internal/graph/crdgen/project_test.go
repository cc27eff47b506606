package crdgen

import (
	"path/filepath"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
)

// projectHyperConverged loads #HyperConverged from the project's CUE
// schema package (schema/ at the repository root); the test fails when it
// does not load.
func projectHyperConverged(t *testing.T) cue.Value {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	insts := load.Instances([]string{"./schema"}, &load.Config{Dir: root})
	if len(insts) != 1 || insts[0].Err != nil {
		t.Fatalf("project schema does not load: %v", insts[0].Err)
	}
	v := cuecontext.New().BuildInstance(insts[0])
	if err := v.Err(); err != nil {
		t.Fatalf("project schema does not build: %v", err)
	}
	def := v.LookupPath(cue.ParsePath("#HyperConverged"))
	if !def.Exists() {
		t.Fatal("project schema has no #HyperConverged")
	}
	return def
}

// hcoNames are the names HCO serves HyperConverged under.
var hcoNames = Names{
	Group:             "hco.kubevirt.io",
	Version:           "v1beta1",
	Kind:              "HyperConverged",
	ShortNames:        []string{"hco", "hcos"},
	Categories:        []string{"all"},
	StatusSubresource: true,
}

// TestProjectSchema converts the project's real #HyperConverged, which
// uses comprehensions, error(), json.Validate and cross-field rules, and
// checks the CRD is one the API server accepts.
func TestProjectSchema(t *testing.T) {
	crd, err := Generate(projectHyperConverged(t), hcoNames)
	if err != nil {
		t.Fatal(err)
	}
	assertCRD(t, crd)
	s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec := at(t, s, "spec")
	if spec.Default == nil {
		t.Errorf("spec: want default {} (regular fields with defaults inside)")
	}
	wantDefault(t, at(t, spec, "uninstallStrategy"), `"BlockUninstallIfWorkloadsExist"`)
	t.Logf("spec has %d properties", len(spec.Properties))
}
