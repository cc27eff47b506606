package crdgen

import (
	"reflect"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// mergeLoose returns a schema that accepts every value a or b accepts (a
// may be nil), used for disjunctions of structs or lists and for the
// elements of closed lists. It keeps the structure both share, the union
// of their properties and enums, the validations they agree on and the
// fields both require; it drops defaults and junctors.
func mergeLoose(a, b *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if a == nil {
		return stripDefaults(b)
	}
	out := &apiextensionsv1.JSONSchemaProps{Nullable: a.Nullable || b.Nullable}
	if a.Description == b.Description {
		out.Description = a.Description
	}
	ta, tb := typeOf(a), typeOf(b)
	switch {
	case ta == tb && ta != "" && ta != "int-or-string":
		out.Type = a.Type
	case intOrString(ta) && intOrString(tb):
		out.XIntOrString = true
		out.Enum = unionEnum(a.Enum, b.Enum)
		return out
	case (ta == "integer" || ta == "number") && (tb == "integer" || tb == "number"):
		out.Type = "number"
		return out
	default:
		out.XPreserveUnknownFields = ptr(true)
		return out
	}
	if a.Format == b.Format {
		out.Format = a.Format
	}
	out.Enum = unionEnum(a.Enum, b.Enum)
	if a.Pattern == b.Pattern {
		out.Pattern = a.Pattern
	}
	if sameNum(a.Minimum, b.Minimum) && a.ExclusiveMinimum == b.ExclusiveMinimum {
		out.Minimum, out.ExclusiveMinimum = a.Minimum, a.ExclusiveMinimum
	}
	if sameNum(a.Maximum, b.Maximum) && a.ExclusiveMaximum == b.ExclusiveMaximum {
		out.Maximum, out.ExclusiveMaximum = a.Maximum, a.ExclusiveMaximum
	}
	if sameNum(a.MultipleOf, b.MultipleOf) {
		out.MultipleOf = a.MultipleOf
	}
	out.MinLength, out.MaxLength = looserMin(a.MinLength, b.MinLength), looserMax(a.MaxLength, b.MaxLength)
	out.MinItems, out.MaxItems = looserMin(a.MinItems, b.MinItems), looserMax(a.MaxItems, b.MaxItems)
	out.MinProperties, out.MaxProperties = looserMin(a.MinProperties, b.MinProperties), looserMax(a.MaxProperties, b.MaxProperties)
	if reflect.DeepEqual(a.XListType, b.XListType) {
		out.XListType = a.XListType
	}

	switch out.Type {
	case "array":
		out.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: mergeLoose(mergeLoose(nil, itemsOf(a)), itemsOf(b))}
	case "object":
		for _, s := range []*apiextensionsv1.JSONSchemaProps{a, b} {
			for k, p := range s.Properties {
				if out.Properties == nil {
					out.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
				}
				if q, ok := out.Properties[k]; ok {
					out.Properties[k] = *mergeLoose(stripDefaults(&q), &p)
				} else {
					out.Properties[k] = *stripDefaults(&p)
				}
			}
		}
		for _, r := range a.Required {
			for _, r2 := range b.Required {
				if r == r2 {
					out.Required = append(out.Required, r)
				}
			}
		}
		apA, apB := additional(a), additional(b)
		switch {
		case apA != nil && apB != nil && len(out.Properties) == 0:
			out.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: mergeLoose(mergeLoose(nil, apA), apB)}
		case apA != nil || apB != nil || isTrue(a.XPreserveUnknownFields) || isTrue(b.XPreserveUnknownFields):
			out.XPreserveUnknownFields = ptr(true)
		}
	}
	return out
}

// typeOf returns the type of s, "int-or-string", or "" for any type.
func typeOf(s *apiextensionsv1.JSONSchemaProps) string {
	if s.XIntOrString {
		return "int-or-string"
	}
	return s.Type
}

func intOrString(t string) bool {
	return t == "integer" || t == "string" || t == "int-or-string"
}

// unionEnum returns the union of two enums, or nil (no restriction) if
// either is unrestricted.
func unionEnum(a, b []apiextensionsv1.JSON) []apiextensionsv1.JSON {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	return appendUnique(appendUnique(nil, a...), b...)
}

func sameNum(a, b *float64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// looserMin returns the smaller lower bound, or nil if either is unbounded.
func looserMin(a, b *int64) *int64 {
	if a == nil || b == nil {
		return nil
	}
	return ptr(min(*a, *b))
}

// looserMax returns the larger upper bound, or nil if either is unbounded.
func looserMax(a, b *int64) *int64 {
	if a == nil || b == nil {
		return nil
	}
	return ptr(max(*a, *b))
}

func itemsOf(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s.Items != nil && s.Items.Schema != nil {
		return s.Items.Schema
	}
	return anything()
}

func additional(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		return s.AdditionalProperties.Schema
	}
	return nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// stripDefaults returns a deep copy of s without defaults and junctors,
// which do not carry over to a merge: a default of one alternative could
// make a value of another invalid.
func stripDefaults(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	c := s.DeepCopy()
	var strip func(*apiextensionsv1.JSONSchemaProps)
	strip = func(x *apiextensionsv1.JSONSchemaProps) {
		x.Default = nil
		x.AllOf, x.AnyOf, x.OneOf, x.Not = nil, nil, nil, nil
		for k, p := range x.Properties {
			strip(&p)
			x.Properties[k] = p
		}
		if x.Items != nil && x.Items.Schema != nil {
			strip(x.Items.Schema)
		}
		if x.AdditionalProperties != nil && x.AdditionalProperties.Schema != nil {
			strip(x.AdditionalProperties.Schema)
		}
	}
	strip(c)
	return c
}
