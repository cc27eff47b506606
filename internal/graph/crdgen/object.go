package crdgen

import (
	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// object fills s, of struct kind, from the fields, pattern constraints and
// openness of v.
func object(s *apiextensionsv1.JSONSchemaProps, v cue.Value, oas *apiextensionsv1.JSONSchemaProps, covered bool, depth int) error {
	s.Type = "object"
	// The whole knows whether it is closed; a bare disjunct may not.
	open := v.Allows(cue.AnyString) || hasPatterns(v)
	switch alts := alternatives(v); len(alts) {
	case 0:
		s.XPreserveUnknownFields = ptr(true)
		return nil
	case 1:
		v = alts[0]
	default:
		if err := merged(s, alts, depth); err != nil {
			return err
		}
		if !open && s.AdditionalProperties == nil {
			s.XPreserveUnknownFields = nil
		}
		return nil
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		// Not enumerable (an unresolved construct): accept any object.
		s.XPreserveUnknownFields = ptr(true)
		return nil
	}
	for it.Next() {
		sel := it.Selector()
		if sel.IsDefinition() || sel.LabelType() == cue.HiddenLabel {
			continue
		}
		name := sel.Unquoted()
		var childOAS *apiextensionsv1.JSONSchemaProps
		if oas != nil {
			if p, ok := oas.Properties[name]; ok {
				childOAS = &p
			}
		}
		fk := fieldKindOf(it.FieldType())
		if depth == 0 && name == "metadata" {
			// The API server takes no schema for an object's metadata
			// (fixRoot sets {type: object}); its CUE rules, such as
			// namespace?: error("…") on a cluster-scoped kind, stay CUE's.
			continue
		}
		child, err := node(it.Value(), childOAS, covered, fk, depth+1)
		if err != nil {
			return err
		}
		if fk == regularField {
			materialize(child)
		}
		if isRequired(fk, it.Value(), child) {
			s.Required = append(s.Required, name)
		}
		if s.Properties == nil {
			s.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		}
		s.Properties[name] = *child
	}

	pattern := v.LookupPath(cue.MakePath(cue.AnyString))
	switch {
	case open && pattern.Exists() && pattern.IncompleteKind() != cue.TopKind && len(s.Properties) == 0:
		// [string]: T
		var apOAS *apiextensionsv1.JSONSchemaProps
		if oas != nil && oas.AdditionalProperties != nil {
			apOAS = oas.AdditionalProperties.Schema
		}
		ap, err := node(pattern, apOAS, covered, elementField, depth+1)
		if err != nil {
			return err
		}
		s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: ap}
	case open:
		// {...}, or fields next to patterns, which a structural schema
		// cannot type: keep whatever is there.
		s.XPreserveUnknownFields = ptr(true)
	}
	return nil
}

// isRequired reports whether a field of kind fk with value v and schema s
// belongs in its parent's required list: a!: T always; a: T unless it has a
// default or its struct may be empty (CUE then fills it in); a?: T never.
func isRequired(fk fieldKind, v cue.Value, s *apiextensionsv1.JSONSchemaProps) bool {
	switch fk {
	case requiredField:
		return true
	case regularField:
		if s.Default != nil {
			return false
		}
		if _, ok := v.Default(); ok {
			return false
		}
		return !(s.Type == "object" && len(s.Required) == 0)
	}
	return false
}

// hasPatterns reports whether v has pattern constraints ([=~"x"]: T).
func hasPatterns(v cue.Value) bool {
	it, err := v.Fields(cue.Patterns(true))
	if err != nil {
		return false
	}
	for it.Next() {
		if it.Selector().ConstraintType() == cue.PatternConstraint {
			return true
		}
	}
	return false
}
