package graph

import (
	"fmt"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/crdgen"
)

// CRD is a CustomResourceDefinition generated from the graph's CUE.
type CRD struct {
	// Name is the key in the graph's CRDs (the plural).
	Name string
	// Object is the CRD as an unstructured object, ready to apply.
	Object *unstructured.Unstructured
}

// CRDs generates the CustomResourceDefinitions listed in the graph's CRDs
// from their CUE definitions (once; the result is cached).
func (e *Engine) CRDs() ([]*CRD, error) {
	e.crdsOnce.Do(func() {
		defer e.Lock()()
		e.crds, e.crdsErr = e.generateCRDs()
	})
	return e.crds, e.crdsErr
}

func (e *Engine) generateCRDs() ([]*CRD, error) {
	it, err := e.graph.LookupPath(cue.ParsePath("CRDs")).Fields()
	if err != nil {
		return nil, Format(err)
	}
	var out []*CRD
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
		if err := e.addServedVersions(it.Value(), crd); err != nil {
			return nil, fmt.Errorf("generating CRD %s: %w", name, err)
		}
		crd.TypeMeta.APIVersion = "apiextensions.k8s.io/v1"
		crd.TypeMeta.Kind = "CustomResourceDefinition"
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			return nil, fmt.Errorf("generating CRD %s: %w", name, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		out = append(out, &CRD{Name: name, Object: u})
	}
	return out, nil
}
