package crdgen

import (
	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// array fills s, of list kind, from the element type and the fixed elements
// of v.
func array(s *apiextensionsv1.JSONSchemaProps, v cue.Value, oas *apiextensionsv1.JSONSchemaProps, covered bool, depth int) error {
	s.Type = "array"
	switch alts := alternatives(v); len(alts) {
	case 0:
		s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: anything()}
		return nil
	case 1:
		v = alts[0]
	default:
		return merged(s, alts, depth)
	}
	var items *apiextensionsv1.JSONSchemaProps
	fixed := 0
	if it, err := v.List(); err == nil {
		for ; it.Next(); fixed++ {
			e, err := node(it.Value(), nil, false, elementField, depth+1)
			if err != nil {
				return err
			}
			items = mergeLoose(items, e)
		}
	}
	if elem := v.LookupPath(cue.MakePath(cue.AnyIndex)); elem.Exists() {
		var itemOAS *apiextensionsv1.JSONSchemaProps
		if oas != nil && oas.Items != nil {
			itemOAS = oas.Items.Schema
		}
		e, err := node(elem, itemOAS, covered && fixed == 0, elementField, depth+1)
		if err != nil {
			return err
		}
		if fixed == 0 {
			items = e
		} else {
			items = mergeLoose(items, e)
		}
	} else {
		// A closed list: [a, b] has exactly two elements.
		s.MaxItems = ptr(int64(fixed))
		if fixed > 0 {
			s.MinItems = ptr(int64(fixed))
		}
	}
	if items == nil {
		items = anything()
	}
	s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: items}
	return nil
}
