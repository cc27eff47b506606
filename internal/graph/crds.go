package graph

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/internal/graph/crdgen"
)

// CRD is a CustomResourceDefinition generated from the graph's CUE.
type CRD struct {
	// Name is the key in the graph's CRDs (the plural).
	Name string
	// Object is the CRD as an unstructured object, ready to apply.
	Object *unstructured.Unstructured
}

// generatedCRDs is crds.gen.json: every CRD of the graph's CRDs as
// generateCRDs derives it from the embedded CUE, checked to be current by
// TestGeneratedCRDsUpToDate (`make gen-crds` rewrites it). Generating them
// at run time costs seconds of CPU and about 900 MB of allocations.
//
//go:embed crds.gen.json
var generatedCRDs []byte

// generatedCRD is one entry of crds.gen.json.
type generatedCRD struct {
	// Name is the key in the graph's CRDs (the plural).
	Name string `json:"name"`
	// CRD serves and stores its storage version only.
	CRD *apiextensionsv1.CustomResourceDefinition `json:"crd"`
	// AlsoServed are the versions it also serves, not stored, once the
	// engine has a conversion webhook (EnableConversion), by name.
	AlsoServed []apiextensionsv1.CustomResourceDefinitionVersion `json:"alsoServed,omitempty"`
}

// CRDs returns the CustomResourceDefinitions listed in the graph's CRDs,
// generated from their CUE definitions at build time (crds.gen.json) and
// finished for the engine's conversion webhook, followed by the CRDs
// applied as upstream ships them (upstreamCRDs: the snapshot.storage.k8s.io
// ones); the result is cached.
func (e *Engine) CRDs() ([]*CRD, error) {
	e.crdsOnce.Do(func() {
		defer e.Lock()()
		var gen []generatedCRD
		if err := json.Unmarshal(generatedCRDs, &gen); err != nil {
			e.crdsErr = fmt.Errorf("graph/crds.gen.json: %w (make gen-crds rewrites it)", err)
			return
		}
		if e.crds, e.crdsErr = e.finishCRDs(gen); e.crdsErr != nil {
			return
		}
		up, err := upstreamCRDs()
		if err != nil {
			e.crdsErr = err
			return
		}
		e.crds = append(e.crds, up...)
	})
	return e.crds, e.crdsErr
}

// finishCRDs adds each CRD's alsoServed versions and the Webhook
// conversion strategy when the engine has a conversion webhook, and
// returns the CRDs as unstructured objects ready to apply.
func (e *Engine) finishCRDs(gen []generatedCRD) ([]*CRD, error) {
	out := make([]*CRD, 0, len(gen))
	for _, g := range gen {
		crd := g.CRD
		if e.conversion != nil && len(g.AlsoServed) > 0 {
			crd = crd.DeepCopy()
			crd.Spec.Versions = append(crd.Spec.Versions, g.AlsoServed...)
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             e.conversion.DeepCopy(),
					ConversionReviewVersions: []string{"v1"},
				},
			}
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			return nil, fmt.Errorf("CRD %s: %w", g.Name, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		out = append(out, &CRD{Name: g.Name, Object: u})
	}
	return out, nil
}

// generateCRDs derives every CRD of the graph's CRDs from its CUE
// definitions with crdgen, with its alsoServed versions: the content of
// crds.gen.json. It takes seconds.
func (e *Engine) generateCRDs() ([]generatedCRD, error) {
	it, err := e.graph.LookupPath(cue.ParsePath("CRDs")).Fields()
	if err != nil {
		return nil, Format(err)
	}
	var out []generatedCRD
	for it.Next() {
		name := it.Selector().String()
		var n struct {
			Group, Version, Kind, Plural, Singular, Scope string
			ShortNames, Categories                        []string
		}
		if err := it.Value().LookupPath(cue.ParsePath("names")).Decode(&n); err != nil {
			return nil, Format(err)
		}
		var columns []apiextensionsv1.CustomResourceColumnDefinition
		if pc := it.Value().LookupPath(cue.ParsePath("printerColumns")); pc.Exists() {
			if err := pc.Decode(&columns); err != nil {
				return nil, Format(err)
			}
		}
		crd, err := crdgen.Generate(it.Value().LookupPath(cue.ParsePath("schema")), crdgen.Names{
			Group: n.Group, Version: n.Version, Kind: n.Kind, ListKind: n.Kind + "List",
			Plural: n.Plural, Singular: n.Singular, ShortNames: n.ShortNames, Categories: n.Categories,
			Scope: apiextensionsv1.ResourceScope(n.Scope), StatusSubresource: true,
			PrinterColumns: columns,
		})
		if err != nil {
			return nil, fmt.Errorf("generating CRD %s: %w", name, err)
		}
		also, err := alsoServed(it.Value(), crd)
		if err != nil {
			return nil, fmt.Errorf("generating CRD %s: %w", name, err)
		}
		crd.TypeMeta.APIVersion = "apiextensions.k8s.io/v1"
		crd.TypeMeta.Kind = "CustomResourceDefinition"
		out = append(out, generatedCRD{Name: name, CRD: crd, AlsoServed: also})
	}
	return out, nil
}
