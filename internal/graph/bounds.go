package graph

import (
	"encoding/json"
	"fmt"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// listBounds gives the openAPI schema of each kind the CRDs define, by
// "apiVersion/kind" (every version served or also served), built once
// from crds.gen.json.
var listBounds = sync.OnceValues(func() (map[string]*apiextensionsv1.JSONSchemaProps, error) {
	var gen []generatedCRD
	if err := json.Unmarshal(generatedCRDs, &gen); err != nil {
		return nil, fmt.Errorf("graph/crds.gen.json: %w (make gen-crds rewrites it)", err)
	}
	out := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, g := range gen {
		spec := g.CRD.Spec
		for _, v := range append(append([]apiextensionsv1.CustomResourceDefinitionVersion{}, spec.Versions...), g.AlsoServed...) {
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				out[spec.Group+"/"+v.Name+"/"+spec.Names.Kind] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	return out, nil
})

// checkListBounds refuses a list of doc longer than the maxItems its
// CRD's schema gives it, before CUE evaluates doc: CUE checks a list's
// constraints together, so an oversized set would still run
// list.UniqueItems, which compares every pair. The walk is linear in the
// size of doc. A document of a kind without a generated CRD passes. The
// error names file:line:col and the field path.
func checkListBounds(doc cue.Value) error {
	schemas, err := listBounds()
	if err != nil {
		return err
	}
	av, _ := doc.LookupPath(cue.ParsePath("apiVersion")).String()
	kind, _ := doc.LookupPath(cue.ParsePath("kind")).String()
	s := schemas[av+"/"+kind]
	if s == nil {
		return nil
	}
	return walkBounds(doc, s, "")
}

func walkBounds(v cue.Value, s *apiextensionsv1.JSONSchemaProps, path string) error {
	switch v.IncompleteKind() {
	case cue.ListKind:
		n, err := v.Len().Int64()
		if err != nil {
			return nil
		}
		if s.MaxItems != nil && n > *s.MaxItems {
			pos := v.Pos()
			if src, ok := v.Source().(*ast.Field); ok {
				pos = src.Value.Pos() // the list, as CUE's own errors place it
			} else if src := v.Source(); src != nil {
				pos = src.Pos()
			}
			return &Error{Lines: []string{fmt.Sprintf("%s:%d:%d: %s: %d items, at most %d allowed",
				pos.Filename(), pos.Line(), pos.Column(), path, n, *s.MaxItems)}}
		}
		if s.Items == nil || s.Items.Schema == nil {
			return nil
		}
		it, _ := v.List()
		for i := 0; it.Next(); i++ {
			if err := walkBounds(it.Value(), s.Items.Schema, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case cue.StructKind:
		it, err := v.Fields()
		if err != nil {
			return nil
		}
		for it.Next() {
			name := it.Selector().Unquoted()
			sub, ok := s.Properties[name]
			if !ok {
				if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
					continue
				}
				sub = *s.AdditionalProperties.Schema
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			if err := walkBounds(it.Value(), &sub, p); err != nil {
				return err
			}
		}
	}
	return nil
}
