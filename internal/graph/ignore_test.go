package graph_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/internal/graph"
)

// TestRenderCarriesGraphRules renders testdata/example and checks what the
// graph declares for the reconciler: the ignore rules, the force opt-in of
// the PriorityClass and the component names of each stage in each
// operators mode.
func TestRenderCarriesGraphRules(t *testing.T) {
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := e.LoadConfig(filepath.Join("..", "..", "testdata", "example"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.Render(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []graph.IgnoreRule{{Kind: "HyperConverged", Paths: []string{"/metadata/annotations/deployOVS"}}}
	if !reflect.DeepEqual(r.IgnoreRules, want) {
		t.Errorf("IgnoreRules = %+v, want %+v", r.IgnoreRules, want)
	}
	if got := r.IgnorePaths(r.HyperConverged); !reflect.DeepEqual(got, []string{"/metadata/annotations/deployOVS"}) {
		t.Errorf("IgnorePaths(HC) = %v", got)
	}
	found := false
	for _, o := range r.Objects() {
		if o.GetKind() == "PriorityClass" {
			found = true
			if o.GetAnnotations()["converge.dev/force"] != "enabled" {
				t.Errorf("PriorityClass annotations = %v, want converge.dev/force: enabled", o.GetAnnotations())
			}
		}
	}
	if !found {
		t.Error("no PriorityClass rendered")
	}
	// The stages follow the operators mode: native derives only the
	// operands converge runs.
	for _, tc := range []struct {
		mode string
		want [][]string
	}{
		{graph.ModeNative, [][]string{nil, {"hco"}, {"cdi", "cnao", "virt"}, {"hpp", "ssp"}}},
		{graph.ModeExternal, [][]string{nil, {"hco"}, {"aaq", "cdi", "cnao", "filerestore", "migration", "virt"}, {"hpp", "ssp"}}},
	} {
		r, err := e.RenderWith(cfg, graph.Inputs{Operators: tc.mode})
		if err != nil {
			t.Fatal(err)
		}
		if r.Operators != tc.mode {
			t.Errorf("%s: Rendered.Operators = %q", tc.mode, r.Operators)
		}
		var names [][]string
		for _, st := range r.Stages {
			names = append(names, st.Nodes)
		}
		if !reflect.DeepEqual(names, tc.want) {
			t.Errorf("%s: stage nodes = %v, want %v", tc.mode, names, tc.want)
		}
	}
}

func TestIgnoreRuleMatches(t *testing.T) {
	obj := func(kind, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	for _, tc := range []struct {
		name string
		rule graph.IgnoreRule
		obj  *unstructured.Unstructured
		want bool
	}{
		{"kind only", graph.IgnoreRule{Kind: "Deployment"}, obj("Deployment", "a", "x"), true},
		{"other kind", graph.IgnoreRule{Kind: "Deployment"}, obj("StatefulSet", "a", "x"), false},
		{"name matches", graph.IgnoreRule{Kind: "Deployment", Name: "x"}, obj("Deployment", "a", "x"), true},
		{"name differs", graph.IgnoreRule{Kind: "Deployment", Name: "y"}, obj("Deployment", "a", "x"), false},
		{"namespace differs", graph.IgnoreRule{Kind: "Deployment", Namespace: "b"}, obj("Deployment", "a", "x"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rule.Matches(tc.obj); got != tc.want {
				t.Errorf("Matches = %v, want %v", got, tc.want)
			}
		})
	}
}
