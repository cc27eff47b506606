package crdgen

import (
	"encoding/json"
	"reflect"
	"regexp"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// formats are the formats the API server checks, by type; the encoder's
// other formats (such as binary) are dropped.
var formats = map[string]map[string]bool{
	"string":  {"byte": true, "date": true, "date-time": true, "duration": true, "password": true},
	"integer": {"int32": true, "int64": true},
	"number":  {"float": true, "double": true},
}

// applyValidations copies into the structural node s the value validations
// of the encoder's schema oas that fit s: enum for any node, and for typed
// nodes the bounds of their type plus allOf, anyOf (from anyOf and oneOf)
// and not, reduced to what a structural schema allows inside them.
func applyValidations(s, oas *apiextensionsv1.JSONSchemaProps) {
	if oas == nil {
		return
	}
	s.Enum = enumFor(s.Type, oas.Enum)
	if s.Type == "" {
		// int-or-string or any type: the encoder stripped the types of
		// the disjuncts, so its junctors no longer say what they meant.
		return
	}
	if f := oas.Format; f != "" && formats[s.Type][f] && s.Format == "" {
		s.Format = f
	}
	switch s.Type {
	case "string":
		if validPattern(oas.Pattern) {
			s.Pattern = oas.Pattern
		}
		s.MinLength, s.MaxLength = oas.MinLength, oas.MaxLength
	case "integer", "number":
		s.Minimum, s.ExclusiveMinimum = oas.Minimum, oas.ExclusiveMinimum && oas.Minimum != nil
		s.Maximum, s.ExclusiveMaximum = oas.Maximum, oas.ExclusiveMaximum && oas.Maximum != nil
		s.MultipleOf = oas.MultipleOf
		if s.Type == "integer" {
			dropUnrepresentableBounds(s)
		}
	case "array":
		if s.MinItems == nil {
			s.MinItems = oas.MinItems
		}
		if s.MaxItems == nil {
			s.MaxItems = oas.MaxItems
		}
		if oas.UniqueItems && s.Items != nil && s.Items.Schema != nil && isScalar(s.Items.Schema) {
			// uniqueItems is forbidden in CRDs; a set is its equivalent.
			s.XListType = ptr("set")
		}
	case "object":
		s.MinProperties, s.MaxProperties = oas.MinProperties, oas.MaxProperties
	}
	junctors := apiextensionsv1.JSONSchemaProps{AllOf: oas.AllOf, AnyOf: oas.AnyOf, OneOf: oas.OneOf, Not: oas.Not}
	j := nested(junctors, s)
	s.AllOf, s.AnyOf, s.Not = j.AllOf, j.AnyOf, j.Not
	// A disjunction of enums is one enum.
	if len(s.AnyOf) > 0 && len(s.Enum) == 0 {
		var union []apiextensionsv1.JSON
		for _, b := range s.AnyOf {
			if len(b.Enum) == 0 || !isEmpty(apiextensionsv1.JSONSchemaProps{Enum: b.Enum}, b) {
				union = nil
				break
			}
			union = appendUnique(union, b.Enum...)
		}
		if union != nil {
			s.Enum, s.AnyOf = enumFor(s.Type, union), nil
		}
	}
}

// nested returns the value validations of x that a structural schema
// allows inside allOf, anyOf, oneOf and not, for a node whose structure is
// skel. The result never rejects a value x accepts: a oneOf becomes an
// anyOf, and a not or anyOf that cannot be kept whole is dropped.
func nested(x apiextensionsv1.JSONSchemaProps, skel *apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	out, _ := reduce(x, skel)
	return out
}

// reduce implements nested and reports whether anything was dropped.
func reduce(x apiextensionsv1.JSONSchemaProps, skel *apiextensionsv1.JSONSchemaProps) (out apiextensionsv1.JSONSchemaProps, changed bool) {
	out = apiextensionsv1.JSONSchemaProps{
		Enum:             x.Enum,
		Minimum:          x.Minimum,
		ExclusiveMinimum: x.ExclusiveMinimum && x.Minimum != nil,
		Maximum:          x.Maximum,
		ExclusiveMaximum: x.ExclusiveMaximum && x.Maximum != nil,
		MultipleOf:       x.MultipleOf,
		MinLength:        x.MinLength,
		MaxLength:        x.MaxLength,
		MinItems:         x.MinItems,
		MaxItems:         x.MaxItems,
		MinProperties:    x.MinProperties,
		MaxProperties:    x.MaxProperties,
		Required:         x.Required,
	}
	if validPattern(x.Pattern) {
		out.Pattern = x.Pattern
	}
	if x.Format != "" && skel != nil && formats[skel.Type][x.Format] {
		out.Format = x.Format
	}
	// Everything else in x is dropped.
	rest := x
	rest.AllOf, rest.AnyOf, rest.OneOf, rest.Not, rest.Properties, rest.Items = nil, nil, nil, nil, nil, nil
	changed = !reflect.DeepEqual(rest, out)

	if len(x.Properties) > 0 {
		for k, p := range x.Properties {
			sp, ok := apiextensionsv1.JSONSchemaProps{}, false
			if skel != nil {
				sp, ok = skel.Properties[k]
			}
			if !ok {
				changed = true
				continue
			}
			r, ch := reduce(p, &sp)
			changed = changed || ch
			if isEmpty(r, apiextensionsv1.JSONSchemaProps{}) {
				continue
			}
			if out.Properties == nil {
				out.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
			}
			out.Properties[k] = r
		}
	}
	if x.Items != nil {
		switch {
		case x.Items.Schema == nil || skel == nil || skel.Items == nil || skel.Items.Schema == nil:
			changed = true
		default:
			r, ch := reduce(*x.Items.Schema, skel.Items.Schema)
			changed = changed || ch
			if !isEmpty(r, apiextensionsv1.JSONSchemaProps{}) {
				out.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &r}
			}
		}
	}
	for _, a := range x.AllOf {
		r, ch := reduce(a, skel)
		changed = changed || ch
		if !isEmpty(r, apiextensionsv1.JSONSchemaProps{}) {
			out.AllOf = append(out.AllOf, r)
		}
	}
	// anyOf and oneOf both become anyOf; a second one goes into allOf.
	for i, list := range [][]apiextensionsv1.JSONSchemaProps{x.AnyOf, x.OneOf} {
		if len(list) == 0 {
			continue
		}
		var branches []apiextensionsv1.JSONSchemaProps
		for _, b := range list {
			if i == 1 {
				b = unexclude(b)
			}
			r, ch := reduce(b, skel)
			changed = changed || ch
			if isEmpty(r, apiextensionsv1.JSONSchemaProps{}) {
				// One branch accepts anything: so does the junctor.
				branches = nil
				changed = true
				break
			}
			branches = append(branches, r)
		}
		switch {
		case len(branches) == 0:
		case len(out.AnyOf) == 0:
			out.AnyOf = branches
		default:
			out.AllOf = append(out.AllOf, apiextensionsv1.JSONSchemaProps{AnyOf: branches})
		}
	}
	if x.Not != nil {
		r, ch := reduce(*x.Not, skel)
		// not(looser) would be stricter: keep a not only if it is intact.
		if ch || isEmpty(r, apiextensionsv1.JSONSchemaProps{}) {
			changed = true
		} else {
			out.Not = &r
		}
	}
	return out, changed
}

// enumFor returns the values of enum that can be values of type typ ("" is
// any type), or nil if none.
func enumFor(typ string, enum []apiextensionsv1.JSON) []apiextensionsv1.JSON {
	var out []apiextensionsv1.JSON
	for _, e := range enum {
		var x any
		if json.Unmarshal(e.Raw, &x) != nil {
			continue
		}
		ok := false
		switch y := x.(type) {
		case string:
			ok = typ == "" || typ == "string"
		case bool:
			ok = typ == "" || typ == "boolean"
		case float64:
			ok = typ == "" || typ == "number" || (typ == "integer" && y == float64(int64(y)))
		case nil:
			ok = false // the API server never accepts null for an enum
		default:
			ok = typ == "" || (typ == "object" && isMap(y)) || (typ == "array" && isList(y))
		}
		if ok {
			out = appendUnique(out, e)
		}
	}
	return out
}

func isMap(x any) bool  { _, ok := x.(map[string]any); return ok }
func isList(x any) bool { _, ok := x.([]any); return ok }

// appendUnique appends the values of add not yet in list.
func appendUnique(list []apiextensionsv1.JSON, add ...apiextensionsv1.JSON) []apiextensionsv1.JSON {
outer:
	for _, a := range add {
		for _, l := range list {
			if string(l.Raw) == string(a.Raw) {
				continue outer
			}
		}
		list = append(list, a)
	}
	return list
}

// isEmpty reports whether x and want are equal (isEmpty(x, {}) reports
// whether x constrains nothing).
func isEmpty(x, want apiextensionsv1.JSONSchemaProps) bool {
	return reflect.DeepEqual(x, want)
}

// isScalar reports whether s is the schema of a scalar.
func isScalar(s *apiextensionsv1.JSONSchemaProps) bool {
	switch s.Type {
	case "string", "integer", "number", "boolean":
		return true
	}
	return s.XIntOrString
}

// validPattern reports whether p is a non-empty regular expression the API
// server accepts.
func validPattern(p string) bool {
	if p == "" {
		return false
	}
	_, err := regexp.Compile(p)
	return err == nil
}

// unexclude removes from a oneOf branch the exclusion the encoder adds to
// keep the branches of a oneOf apart ({allOf: [X, {not: {anyOf: [...]}}]}
// or just the not): as an anyOf branch X alone is enough, and the
// exclusion can even contradict X when one disjunct subsumes another.
func unexclude(b apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	isExclusion := func(x apiextensionsv1.JSONSchemaProps) bool {
		return x.Not != nil && len(x.Not.AnyOf) > 0 && isEmpty(x, apiextensionsv1.JSONSchemaProps{Not: x.Not})
	}
	if isExclusion(b) {
		return apiextensionsv1.JSONSchemaProps{}
	}
	if len(b.AllOf) == 2 && isExclusion(b.AllOf[1]) && isEmpty(b, apiextensionsv1.JSONSchemaProps{AllOf: b.AllOf}) {
		return b.AllOf[0]
	}
	return b
}

// maxExactInt is the largest integer a float64 bound holds exactly (2^53).
const maxExactInt = 1 << 53

// dropUnrepresentableBounds removes integer bounds a float64 cannot hold
// exactly, such as CUE int64's ±2^63: the API server rejects them as not
// integers ("Maximum boundary value must be of type integer"). Such a
// bound only restates the int64 range, which the format says.
func dropUnrepresentableBounds(s *apiextensionsv1.JSONSchemaProps) {
	if s.Minimum != nil && (*s.Minimum <= -maxExactInt || *s.Minimum >= maxExactInt) {
		s.Minimum, s.ExclusiveMinimum = nil, false
	}
	if s.Maximum != nil && (*s.Maximum <= -maxExactInt || *s.Maximum >= maxExactInt) {
		s.Maximum, s.ExclusiveMaximum = nil, false
	}
}
