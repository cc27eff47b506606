package crdgen

import (
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// fixRoot turns the schema of an object definition into what the API
// server accepts at the root of a CRD: an object whose apiVersion and kind
// are plain strings and whose metadata is just {type: object} (the server
// supplies ObjectMeta itself), without a root default, nullable or
// additionalProperties, and with none of the three in required.
func fixRoot(s *apiextensionsv1.JSONSchemaProps) {
	s.Type = "object"
	s.XIntOrString = false
	s.Nullable = false
	s.Default = nil
	s.Enum = nil
	if s.AdditionalProperties != nil {
		s.AdditionalProperties = nil
		s.XPreserveUnknownFields = ptr(true)
	}
	if s.Properties == nil {
		s.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
	}
	for _, f := range []string{"apiVersion", "kind"} {
		s.Properties[f] = apiextensionsv1.JSONSchemaProps{Type: "string", Description: s.Properties[f].Description}
	}
	s.Properties["metadata"] = apiextensionsv1.JSONSchemaProps{Type: "object"}
	s.Required = slices.DeleteFunc(s.Required, func(f string) bool {
		return f == "apiVersion" || f == "kind" || f == "metadata"
	})
	if len(s.Required) == 0 {
		s.Required = nil
	}
	// Junctors may have constrained the replaced fields.
	j := nested(apiextensionsv1.JSONSchemaProps{AllOf: s.AllOf, AnyOf: s.AnyOf, Not: s.Not}, withoutMeta(s))
	s.AllOf, s.AnyOf, s.Not = j.AllOf, j.AnyOf, j.Not
}

// withoutMeta returns s without the properties apiVersion, kind and
// metadata, so that junctors about them are dropped.
func withoutMeta(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	c := *s
	c.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
	for k, p := range s.Properties {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			c.Properties[k] = p
		}
	}
	return &c
}
