package crdgen

import (
	"reflect"

	"cuelang.org/go/cue"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// defaultOf returns the default of v reached as fk: the CUE default
// (*x), or for a regular field with a concrete scalar or list value that
// value (CUE fills it in, so the API server does too). Null and empty-list
// defaults are left out: they say no more than an absent field.
func defaultOf(v cue.Value, fk fieldKind) *apiextensionsv1.JSON {
	d, ok := v.Default()
	if !ok {
		k := v.IncompleteKind()
		if fk != regularField || k == cue.StructKind || !v.IsConcrete() {
			return nil
		}
		d = v
	}
	if d.Validate(cue.Concrete(true)) != nil || d.IsNull() {
		return nil
	}
	if d.Kind() == cue.ListKind {
		if n, err := d.Len().Int64(); err != nil || n == 0 {
			return nil
		}
	}
	b, err := d.MarshalJSON()
	if err != nil {
		return nil
	}
	return &apiextensionsv1.JSON{Raw: b}
}

// materialize gives s, the schema of a regular struct field, the default
// {} when s may be empty and something inside it has a default: CUE fills
// in a regular field and its defaults, and the API server only defaults
// inside objects that exist.
func materialize(s *apiextensionsv1.JSONSchemaProps) {
	if s.Type == "object" && s.Default == nil && len(s.Required) == 0 && hasNestedDefaults(s) {
		s.Default = &apiextensionsv1.JSON{Raw: []byte("{}")}
	}
}

// hasNestedDefaults reports whether a property of s, at any depth, has a
// default.
func hasNestedDefaults(s *apiextensionsv1.JSONSchemaProps) bool {
	for _, p := range s.Properties {
		if p.Default != nil || hasNestedDefaults(&p) {
			return true
		}
	}
	return false
}

// dropInvalidDefaults removes every default in s that the API server would
// reject: one that does not validate against its schema or that holds
// fields the schema prunes.
func dropInvalidDefaults(s *apiextensionsv1.JSONSchemaProps) {
	if s.Default != nil && !defaultIsValid(s) {
		s.Default = nil
	}
	for k, p := range s.Properties {
		dropInvalidDefaults(&p)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		dropInvalidDefaults(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		dropInvalidDefaults(s.AdditionalProperties.Schema)
	}
}

// defaultIsValid checks the default of s the way the API server does when
// it validates a CRD.
func defaultIsValid(s *apiextensionsv1.JSONSchemaProps) bool {
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(s, &internal, nil); err != nil {
		return false
	}
	ss, err := structuralschema.NewStructural(&internal)
	if err != nil {
		return false
	}
	var obj any
	if err := utiljson.Unmarshal(s.Default.Raw, &obj); err != nil {
		return false
	}
	pruned := runtime.DeepCopyJSONValue(obj)
	pruning.Prune(pruned, ss, false)
	if !reflect.DeepEqual(pruned, obj) {
		return false
	}
	v := validate.NewSchemaValidator(ss.ToKubeOpenAPI(), nil, "", strfmt.Default)
	return v.Validate(obj).IsValid()
}
