package graph

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var updateCRDs = flag.Bool("update-crds", os.Getenv("UPDATE_GOLDEN") == "1", "rewrite crds.gen.json from the CUE")

// TestGeneratedCRDsUpToDate fails when crds.gen.json, which the engine
// embeds, differs from what generateCRDs derives from the embedded CUE,
// naming each CRD that differs; -update-crds (make gen-crds) rewrites it.
func TestGeneratedCRDsUpToDate(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	gen, err := e.generateCRDs()
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.MarshalIndent(gen, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *updateCRDs {
		if err := os.WriteFile("crds.gen.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if bytes.Equal(generatedCRDs, want) {
		return
	}
	var embedded []generatedCRD
	if err := json.Unmarshal(generatedCRDs, &embedded); err != nil {
		t.Fatalf("crds.gen.json: %v; run make gen-crds", err)
	}
	old := map[string][]byte{}
	for _, g := range embedded {
		old[g.Name], _ = json.Marshal(g)
	}
	for _, g := range gen {
		b, _ := json.Marshal(g)
		if !bytes.Equal(old[g.Name], b) {
			t.Errorf("CRD %s differs from the CUE", g.Name)
		}
		delete(old, g.Name)
	}
	for name := range old {
		t.Errorf("CRD %s is no longer in the graph", name)
	}
	t.Errorf("graph/crds.gen.json is stale: run make gen-crds")
}

// TestCRDsConversion: without a conversion webhook a CRD serves its
// storage version only; with one, the HyperConverged CRD also serves its
// alsoServed v1beta1 (not stored) through the webhook.
func TestCRDsConversion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		convert  bool
		versions []string
	}{
		{"storage version only", false, []string{"v1"}},
		{"with a conversion webhook", true, []string{"v1", "v1beta1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEngine()
			if err != nil {
				t.Fatal(err)
			}
			url := "https://127.0.0.1:4343/convert"
			if tc.convert {
				e.EnableConversion(apiextensionsv1.WebhookClientConfig{URL: &url})
			}
			crds, err := e.CRDs()
			if err != nil {
				t.Fatal(err)
			}
			var hc *unstructured.Unstructured
			for _, c := range crds {
				if c.Object.GetName() == "hyperconvergeds.hco.kubevirt.io" {
					hc = c.Object
				}
			}
			if hc == nil {
				t.Fatal("no HyperConverged CRD")
			}
			versions, _, _ := unstructured.NestedSlice(hc.Object, "spec", "versions")
			var names []string
			for _, v := range versions {
				names = append(names, v.(map[string]any)["name"].(string))
				if v.(map[string]any)["storage"] != (v.(map[string]any)["name"] == "v1") {
					t.Errorf("version %v: storage %v", v.(map[string]any)["name"], v.(map[string]any)["storage"])
				}
			}
			if !slices.Equal(names, tc.versions) {
				t.Errorf("versions %v, want %v", names, tc.versions)
			}
			strategy, _, _ := unstructured.NestedString(hc.Object, "spec", "conversion", "strategy")
			gotURL, _, _ := unstructured.NestedString(hc.Object, "spec", "conversion", "webhook", "clientConfig", "url")
			if tc.convert && (strategy != "Webhook" || gotURL != url) {
				t.Errorf("conversion strategy %q url %q, want Webhook %s", strategy, gotURL, url)
			}
			if !tc.convert && strategy == "Webhook" {
				t.Errorf("conversion strategy Webhook without a conversion webhook")
			}
		})
	}
}
