package crdgen

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// compile compiles CUE source and returns the value at path (for example
// "#R").
func compile(t *testing.T, src, path string) cue.Value {
	t.Helper()
	v := cuecontext.New().CompileString(src)
	if err := v.Err(); err != nil {
		t.Fatalf("compile: %v", err)
	}
	d := v.LookupPath(cue.ParsePath(path))
	if !d.Exists() {
		t.Fatalf("%s not found", path)
	}
	return d
}

// fixture returns the #HyperConverged definition of testdata.
func fixture(t *testing.T) cue.Value {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "hyperconverged.cue"))
	if err != nil {
		t.Fatal(err)
	}
	return compile(t, string(b), "#HyperConverged")
}

// fixtureNames are the names the fixture is served under.
var fixtureNames = Names{
	Group:             "hco.example.io",
	Version:           "v1beta1",
	Kind:              "HyperConverged",
	ShortNames:        []string{"hco"},
	Categories:        []string{"all"},
	StatusSubresource: true,
	PrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{{
		Name: "Uninstall", Type: "string", JSONPath: ".spec.uninstallStrategy",
	}},
}

// toStructural converts a v1 schema the way the API server does: to the
// internal type, then to a structural schema.
func toStructural(t *testing.T, s *apiextensionsv1.JSONSchemaProps) *structuralschema.Structural {
	t.Helper()
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(s, &internal, nil); err != nil {
		t.Fatalf("convert: %v", err)
	}
	ss, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatalf("NewStructural: %v", err)
	}
	return ss
}

// assertStructural checks that s is a schema the API server accepts at the
// root of a CRD: structural (apiextensions' own ValidateStructural), free
// of what ValidateCustomResourceDefinition forbids besides (uniqueItems,
// items arrays, properties with additionalProperties, $ref,
// additionalItems, patternProperties, type null, defaults under metadata,
// apiVersion or kind), and with every default valid against and unchanged
// by pruning with its schema.
func assertStructural(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	ss := toStructural(t, s)
	if errs := structuralschema.ValidateStructural(field.NewPath("openAPIV3Schema"), ss); len(errs) > 0 {
		t.Fatalf("not structural: %v\nschema: %s", errs.ToAggregate(), dump(s))
	}
	var check func(p *field.Path, s *apiextensionsv1.JSONSchemaProps, root, meta bool)
	check = func(p *field.Path, s *apiextensionsv1.JSONSchemaProps, root, meta bool) {
		switch {
		case s.UniqueItems:
			t.Errorf("%s: uniqueItems is forbidden", p)
		case s.Items != nil && len(s.Items.JSONSchemas) > 0:
			t.Errorf("%s: items must be a schema", p)
		case s.AdditionalProperties != nil && len(s.Properties) > 0 && (s.AdditionalProperties.Schema != nil || !s.AdditionalProperties.Allows):
			t.Errorf("%s: additionalProperties and properties are mutually exclusive", p)
		case s.Ref != nil, s.AdditionalItems != nil, len(s.PatternProperties) > 0, s.Type == "null":
			t.Errorf("%s: unsupported keyword", p)
		case meta && s.Default != nil:
			t.Errorf("%s: default under metadata", p)
		}
		if s.Default != nil && !meta {
			checkDefault(t, p, s)
		}
		for k, c := range s.Properties {
			check(p.Child("properties").Key(k), &c, false, meta || (root && (k == "metadata" || k == "apiVersion" || k == "kind")))
		}
		if s.Items != nil && s.Items.Schema != nil {
			check(p.Child("items"), s.Items.Schema, false, meta)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			check(p.Child("additionalProperties"), s.AdditionalProperties.Schema, false, meta)
		}
	}
	check(field.NewPath("openAPIV3Schema"), s, true, false)
}

// checkDefault validates the default of s against s and checks that
// pruning leaves it as it is, as the API server does.
func checkDefault(t *testing.T, p *field.Path, s *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	ss := toStructural(t, s)
	var obj any
	if err := utiljson.Unmarshal(s.Default.Raw, &obj); err != nil {
		t.Errorf("%s: default: %v", p, err)
		return
	}
	pruned := runtime.DeepCopyJSONValue(obj)
	pruning.Prune(pruned, ss, false)
	if !reflect.DeepEqual(pruned, obj) {
		t.Errorf("%s: default %s has pruned fields", p, s.Default.Raw)
	}
	if res := validator(ss).Validate(obj); !res.IsValid() {
		t.Errorf("%s: default %s is invalid: %v", p, s.Default.Raw, res.Errors)
	}
}

// validator returns a kube-openapi validator for ss, the library the API
// server validates custom resources with.
func validator(ss *structuralschema.Structural) *validate.SchemaValidator {
	var k *spec.Schema = ss.ToKubeOpenAPI()
	return validate.NewSchemaValidator(k, nil, "", strfmt.Default)
}

// assertCRD checks a generated CRD: its schema as assertStructural does,
// and its names as the API server does.
func assertCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	var internal apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, &internal, nil); err != nil {
		t.Fatalf("convert CRD: %v", err)
	}
	if want := crd.Spec.Names.Plural + "." + crd.Spec.Group; crd.Name != want {
		t.Errorf("name %q, want %q", crd.Name, want)
	}
	if len(internal.Spec.Versions) != 1 || !internal.Spec.Versions[0].Served || !internal.Spec.Versions[0].Storage {
		t.Errorf("want one served and stored version, got %+v", internal.Spec.Versions)
	}
	assertStructural(t, crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
}

// dump returns s as JSON for failure messages.
func dump(s any) string {
	b, _ := utiljson.Marshal(s)
	return string(b)
}

// at returns the schema at a dotted path of property names; "[]" steps
// into items and "*" into additionalProperties.
func at(t *testing.T, s *apiextensionsv1.JSONSchemaProps, path ...string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for i, p := range path {
		switch p {
		case "[]":
			if s.Items == nil || s.Items.Schema == nil {
				t.Fatalf("%v: no items", path[:i])
			}
			s = s.Items.Schema
		case "*":
			if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
				t.Fatalf("%v: no additionalProperties", path[:i])
			}
			s = s.AdditionalProperties.Schema
		default:
			c, ok := s.Properties[p]
			if !ok {
				t.Fatalf("%v: no property %q in %s", path[:i], p, dump(s))
			}
			s = &c
		}
	}
	return s
}
