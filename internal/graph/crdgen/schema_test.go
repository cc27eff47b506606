package crdgen

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

type schemaCase struct {
	name  string
	src   string // CUE with a #R definition
	check func(t *testing.T, s *apiextensionsv1.JSONSchemaProps)
}

var schemaCases = []schemaCase{{
	name: "closed struct lists properties without preserve-unknown-fields",
	src:  `#R: spec?: {a?: string, b?: bool}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		spec := at(t, s, "spec")
		wantType(t, spec, "object")
		wantType(t, at(t, spec, "a"), "string")
		wantType(t, at(t, spec, "b"), "boolean")
		if spec.XPreserveUnknownFields != nil || spec.AdditionalProperties != nil {
			t.Errorf("closed struct is open: %s", dump(spec))
		}
		if s.XPreserveUnknownFields != nil {
			t.Errorf("closed root is open: %s", dump(s))
		}
	},
}, {
	name: "open struct preserves unknown fields",
	src:  `#R: spec?: {a?: {x?: int, ...}, b?: {...}}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		for _, f := range []string{"a", "b"} {
			x := at(t, s, "spec", f)
			wantType(t, x, "object")
			if x.XPreserveUnknownFields == nil || !*x.XPreserveUnknownFields {
				t.Errorf("%s: want x-kubernetes-preserve-unknown-fields, got %s", f, dump(x))
			}
		}
		wantType(t, at(t, s, "spec", "a", "x"), "integer")
		if p := at(t, s, "spec"); p.XPreserveUnknownFields != nil {
			t.Errorf("spec is closed, got %s", dump(p))
		}
	},
}, {
	name: "enum disjunction with default gives enum and default",
	src: `
#Strategy: "Block" | "Remove"
#R: spec: {
	s: #Strategy | *"Block"
	t?: "a" | *"b" | "c"
	u?: *"x" | "y" | null
}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		x := at(t, s, "spec", "s")
		wantType(t, x, "string")
		wantEnum(t, x, `"Block"`, `"Remove"`)
		wantDefault(t, x, `"Block"`)
		y := at(t, s, "spec", "t")
		wantEnum(t, y, `"a"`, `"b"`, `"c"`)
		wantDefault(t, y, `"b"`)
		// The API server rejects null with an enum, even one listing
		// null, but drops a null of a field that is not nullable.
		z := at(t, s, "spec", "u")
		if z.Nullable {
			t.Errorf("u: an enum must not be nullable")
		}
		wantEnum(t, z, `"x"`, `"y"`)
		wantDefault(t, z, `"x"`)
	},
}, {
	name: "disjunction of enum definitions becomes one enum",
	src: `
#A: "a" | "b"
#B: "c"
#R: spec?: {x?: #A | #B}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		x := at(t, s, "spec", "x")
		wantType(t, x, "string")
		wantEnum(t, x, `"a"`, `"b"`, `"c"`)
		if len(x.AnyOf)+len(x.OneOf)+len(x.AllOf) > 0 {
			t.Errorf("junctors left: %s", dump(x))
		}
	},
}, {
	name: "int with default, also bounded",
	src:  `#R: spec: {replicas: int | *3, ratio?: number | *1.5, on: bool | *true, bounded: int & >=1 & <=100 | *5}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		b := at(t, s, "spec", "bounded")
		wantDefault(t, b, `5`)
		wantNum(t, "bounded.minimum", b.Minimum, 1)
		wantNum(t, "bounded.maximum", b.Maximum, 100)
		r := at(t, s, "spec", "replicas")
		wantType(t, r, "integer")
		wantDefault(t, r, `3`)
		wantType(t, at(t, s, "spec", "ratio"), "number")
		wantDefault(t, at(t, s, "spec", "ratio"), `1.5`)
		wantDefault(t, at(t, s, "spec", "on"), `true`)
		if len(r.Enum) > 0 {
			t.Errorf("int | *3 is no enum: %s", dump(r))
		}
	},
}, {
	name: "int bounds give minimum and maximum",
	src: `#R: spec?: {
	a?: int & >=1 & <=10
	b?: int & >0 & <100
	c?: uint8
	d?: int32
	e?: int64
	f?: int64 & >=0
}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		a := at(t, s, "spec", "a")
		wantType(t, a, "integer")
		wantNum(t, "a.minimum", a.Minimum, 1)
		wantNum(t, "a.maximum", a.Maximum, 10)
		if a.ExclusiveMinimum || a.ExclusiveMaximum {
			t.Errorf("a: bounds are inclusive: %s", dump(a))
		}
		b := at(t, s, "spec", "b")
		wantNum(t, "b.minimum", b.Minimum, 0)
		wantNum(t, "b.maximum", b.Maximum, 100)
		if !b.ExclusiveMinimum || !b.ExclusiveMaximum {
			t.Errorf("b: bounds are exclusive: %s", dump(b))
		}
		c := at(t, s, "spec", "c")
		wantNum(t, "c.minimum", c.Minimum, 0)
		wantNum(t, "c.maximum", c.Maximum, 255)
		if d := at(t, s, "spec", "d"); d.Format != "int32" {
			t.Errorf("d: want format int32, got %s", dump(d))
		}
		// ±2^63 is no integer a float64 bound can hold: the API server
		// rejects it; the format says the range.
		if e := at(t, s, "spec", "e"); e.Maximum != nil || e.Minimum != nil || e.Format != "int64" {
			t.Errorf("e: want format int64 and no bounds, got %s", dump(e))
		}
		if f := at(t, s, "spec", "f"); f.Maximum != nil {
			t.Errorf("f: want no maximum, got %s", dump(f))
		}
		wantNum(t, "f.minimum", at(t, s, "spec", "f").Minimum, 0)
	},
}, {
	name: "regex gives pattern",
	src: `#R: spec?: {
	name?: =~"^[a-z]+$"
	both?: =~"^a" & =~"b$"
	not?: string & !~"^x"
}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		n := at(t, s, "spec", "name")
		wantType(t, n, "string")
		if n.Pattern != "^[a-z]+$" {
			t.Errorf("name: pattern %q", n.Pattern)
		}
		b := at(t, s, "spec", "both")
		var pats []string
		for _, a := range append([]apiextensionsv1.JSONSchemaProps{*b}, b.AllOf...) {
			if a.Pattern != "" {
				pats = append(pats, a.Pattern)
			}
		}
		slices.Sort(pats)
		if !reflect.DeepEqual(pats, []string{"^a", "b$"}) {
			t.Errorf("both: patterns %v in %s", pats, dump(b))
		}
		if x := at(t, s, "spec", "not"); x.Not == nil || x.Not.Pattern != "^x" {
			t.Errorf("not: want not: {pattern: ^x}, got %s", dump(x))
		}
	},
}, {
	name: "string lengths and formats",
	src: `
import (
	"strings"
	"time"
)
#R: spec?: {
	s?: strings.MinRunes(1) & strings.MaxRunes(5)
	withDefault: strings.MaxRunes(5) | *"abc"
	ts?: time.Time
	i?: int64
}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		x := at(t, s, "spec", "s")
		wantInt(t, "s.minLength", x.MinLength, 1)
		wantInt(t, "s.maxLength", x.MaxLength, 5)
		d := at(t, s, "spec", "withDefault")
		wantInt(t, "withDefault.maxLength", d.MaxLength, 5)
		wantDefault(t, d, `"abc"`)
		if ts := at(t, s, "spec", "ts"); ts.Type != "string" || ts.Format != "date-time" {
			t.Errorf("ts: %s", dump(ts))
		}
		if i := at(t, s, "spec", "i"); i.Type != "integer" || i.Format != "int64" || i.Minimum != nil {
			t.Errorf("i: %s", dump(i))
		}
	},
}, {
	name: "required, optional and regular fields",
	src: `#R: spec: {
	req!: string
	opt?: string
	reg: string
	regDefault: string | *"x"
	regStruct: {a?: int}
	regStructRequired: {a!: int}
	regList: [...string]
}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		got := slices.Sorted(slices.Values(at(t, s, "spec").Required))
		want := []string{"reg", "regStructRequired", "req"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("required %v, want %v", got, want)
		}
		if !slices.Contains(s.Required, "spec") {
			t.Errorf("root: spec has required fields and must be required: %v", s.Required)
		}
	},
}, {
	name: "regular struct with defaults inside defaults to {}",
	src: `#R: spec: {
	gates: {a: bool | *false, b?: bool}
	nested: {inner: {x: int | *1}}
	noDefaults: {y?: int}
	opt?: {z: int | *2}
}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		wantDefault(t, at(t, s, "spec"), `{}`)
		wantDefault(t, at(t, s, "spec", "gates"), `{}`)
		wantDefault(t, at(t, s, "spec", "nested"), `{}`)
		wantDefault(t, at(t, s, "spec", "nested", "inner"), `{}`)
		wantDefault(t, at(t, s, "spec", "opt", "z"), `2`)
		for _, f := range []string{"noDefaults", "opt"} {
			if d := at(t, s, "spec", f).Default; d != nil {
				t.Errorf("%s: unexpected default %s", f, d.Raw)
			}
		}
		if len(s.Required) != 0 {
			t.Errorf("spec defaults to {}, so it is not required: %v", s.Required)
		}
	},
}, {
	name: "list of structs",
	src: `#R: spec?: {
	items?: [...{name!: string, size?: int & >=0}]
	tags?: [...string]
}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		l := at(t, s, "spec", "items")
		wantType(t, l, "array")
		e := at(t, l, "[]")
		wantType(t, e, "object")
		wantType(t, at(t, e, "name"), "string")
		wantNum(t, "size.minimum", at(t, e, "size").Minimum, 0)
		if !reflect.DeepEqual(e.Required, []string{"name"}) {
			t.Errorf("element required %v", e.Required)
		}
		wantType(t, at(t, s, "spec", "tags", "[]"), "string")
	},
}, {
	name: "list builtins and closed lists",
	src: `
import "list"
#R: spec?: {
	one?: [...string] & list.MaxItems(1)
	some?: [...int] & list.MinItems(1) & list.MaxItems(3)
	set?: [...string] & list.UniqueItems()
	boundedSet?: [...string] & #BoundedSet
	pair?: [int, int]
	withDefault: [...string] | *["a", "b"]
}
#BoundedSet: list.MaxItems(#Max) & list.UniqueItems()
#Max: 256`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		wantInt(t, "one.maxItems", at(t, s, "spec", "one").MaxItems, 1)
		some := at(t, s, "spec", "some")
		wantInt(t, "some.minItems", some.MinItems, 1)
		wantInt(t, "some.maxItems", some.MaxItems, 3)
		if set := at(t, s, "spec", "set"); set.XListType == nil || *set.XListType != "set" || set.UniqueItems {
			t.Errorf("set: want x-kubernetes-list-type: set, got %s", dump(set))
		}
		// A definition of list builtins, as schema #UniqueItems.
		bs := at(t, s, "spec", "boundedSet")
		if bs.XListType == nil || *bs.XListType != "set" {
			t.Errorf("boundedSet: want x-kubernetes-list-type: set, got %s", dump(bs))
		}
		wantInt(t, "boundedSet.maxItems", bs.MaxItems, 256)
		pair := at(t, s, "spec", "pair")
		wantInt(t, "pair.minItems", pair.MinItems, 2)
		wantInt(t, "pair.maxItems", pair.MaxItems, 2)
		wantType(t, at(t, pair, "[]"), "integer")
		wd := at(t, s, "spec", "withDefault")
		wantDefault(t, wd, `["a","b"]`)
		if len(at(t, wd, "[]").Enum) > 0 {
			t.Errorf("withDefault: elements are any string: %s", dump(wd))
		}
	},
}, {
	name: "map gives additionalProperties",
	src: `#R: spec?: {
	labels?: [string]: string
	limits?: [string]: int | string
	plugins?: [string]: {image!: string}
	mixed?: {a?: string, [string]: string}
}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		l := at(t, s, "spec", "labels")
		wantType(t, l, "object")
		wantType(t, at(t, l, "*"), "string")
		if len(l.Properties) > 0 || l.XPreserveUnknownFields != nil {
			t.Errorf("labels: %s", dump(l))
		}
		if x := at(t, s, "spec", "limits", "*"); !x.XIntOrString {
			t.Errorf("limits: want int-or-string values, got %s", dump(x))
		}
		p := at(t, s, "spec", "plugins", "*")
		wantType(t, p, "object")
		if !reflect.DeepEqual(p.Required, []string{"image"}) {
			t.Errorf("plugins: required %v", p.Required)
		}
		m := at(t, s, "spec", "mixed")
		if m.AdditionalProperties != nil || m.XPreserveUnknownFields == nil {
			t.Errorf("mixed: properties and a pattern must preserve unknown fields: %s", dump(m))
		}
	},
}, {
	name: "nested definitions referenced by name are expanded",
	src: `
#Toleration: {key?: string, operator?: "Exists" | "Equal"}
#Placement: {nodeSelector?: [string]: string, tolerations?: [...#Toleration]}
#R: spec?: {infra?: #Placement, workloads?: {#Placement, extra?: bool}}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		for _, f := range []string{"infra", "workloads"} {
			tol := at(t, s, "spec", f, "tolerations", "[]")
			wantType(t, tol, "object")
			wantEnum(t, at(t, tol, "operator"), `"Exists"`, `"Equal"`)
			wantType(t, at(t, s, "spec", f, "nodeSelector", "*"), "string")
		}
		wantType(t, at(t, s, "spec", "workloads", "extra"), "boolean")
		if b, _ := json.Marshal(s); strings.Contains(string(b), "$ref") {
			t.Errorf("references left: %s", b)
		}
	},
}, {
	name: "unsupported constructs keep their type",
	src: `
import (
	"encoding/json"
	"strings"
	"time"
)
#R: spec?: {
	d?: string & time.Duration
	j?: string & json.Valid
	ne?: string & !=""
	pre?: string & strings.HasPrefix("x")
	ts?: time.Time
	comp?: {for k in ["a", "b"] {(k): int | *1}}
	cross?: {
		min?: int
		max?: int
		if min != _|_ if max != _|_ if min > max {error("min > max")}
	}
	big?: int & (<5 | >10) & !=7
	nePattern?: string & !="" & =~"^x"
	sibling?: int & >=1
}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		for _, f := range []string{"d", "j", "ne", "pre", "ts"} {
			wantType(t, at(t, s, "spec", f), "string")
		}
		// What the encoder can express survives next to what it cannot.
		if p := at(t, s, "spec", "nePattern"); p.Pattern != "^x" {
			t.Errorf("nePattern: want pattern ^x, got %s", dump(p))
		}
		wantNum(t, "sibling.minimum", at(t, s, "spec", "sibling").Minimum, 1)
		wantDefault(t, at(t, s, "spec", "comp", "a"), `1`)
		wantType(t, at(t, s, "spec", "cross", "min"), "integer")
		wantType(t, at(t, s, "spec", "big"), "integer")
	},
}, {
	name: "list with a closed default still allows the open list",
	src: `#M: "LiveMigrate" | "Evict"
#R: spec?: {m: *["LiveMigrate"] | [...#M]}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		m := at(t, s, "spec", "m")
		if m.MaxItems != nil || m.MinItems != nil {
			t.Errorf("m: the default [LiveMigrate] must not bound the list: %s", dump(m))
		}
		if m.Items == nil || len(m.Items.Schema.Enum) != 2 {
			t.Errorf("m: items must allow both methods: %s", dump(m))
		}
		wantDefault(t, m, `["LiveMigrate"]`)
	},
}, {
	name: "int or string and any",
	src:  `#R: spec?: {port?: int | string, any?: _, b?: bytes, n?: null | string, anyList?: [...]}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		p := at(t, s, "spec", "port")
		if !p.XIntOrString || p.Type != "" {
			t.Errorf("port: %s", dump(p))
		}
		a := at(t, s, "spec", "any")
		if a.XPreserveUnknownFields == nil || a.Type != "" {
			t.Errorf("any: %s", dump(a))
		}
		if b := at(t, s, "spec", "b"); b.Type != "string" || b.Format != "byte" {
			t.Errorf("bytes: %s", dump(b))
		}
		if n := at(t, s, "spec", "n"); n.Type != "string" || !n.Nullable {
			t.Errorf("null | string: %s", dump(n))
		}
		wantType(t, at(t, s, "spec", "anyList"), "array")
	},
}, {
	name: "disjunction of structs",
	src:  `#R: spec?: {source?: {http!: {url!: string}} | {registry!: {image!: string}}}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		src := at(t, s, "spec", "source")
		wantType(t, src, "object")
		wantType(t, at(t, src, "http", "url"), "string")
		wantType(t, at(t, src, "registry", "image"), "string")
		if src.XPreserveUnknownFields != nil {
			t.Errorf("closed disjuncts: %s", dump(src))
		}
		if len(src.AnyOf) != 2 {
			t.Errorf("want anyOf of the two shapes, got %s", dump(src))
		}
	},
}, {
	name: "recursive definition terminates",
	src: `
#Node: {name!: string, children?: [...#Node], next?: #Node}
#R: spec?: {tree?: #Node}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		tree := at(t, s, "spec", "tree")
		wantType(t, at(t, tree, "name"), "string")
		if n := at(t, tree, "next"); n.XPreserveUnknownFields == nil {
			t.Errorf("next: want preserve-unknown-fields at the cycle, got %s", dump(n))
		}
	},
}, {
	name: "root apiVersion, kind and metadata",
	src: `
#R: {
	// The API version.
	apiVersion: "x.io/v1"
	kind: "R"
	metadata: {name: *"x" | string, labels?: [string]: string, namespace?: error("cluster-scoped")}
	spec?: {}
}`,
	check: func(t *testing.T, s *apiextensionsv1.JSONSchemaProps) {
		for _, f := range []string{"apiVersion", "kind"} {
			x := at(t, s, f)
			if x.Type != "string" || len(x.Enum) > 0 || x.Default != nil {
				t.Errorf("%s: want a plain string, got %s", f, dump(x))
			}
		}
		if at(t, s, "apiVersion").Description != "The API version." {
			t.Errorf("apiVersion: description lost")
		}
		if m := at(t, s, "metadata"); !reflect.DeepEqual(*m, apiextensionsv1.JSONSchemaProps{Type: "object"}) {
			t.Errorf("metadata: %s", dump(m))
		}
		if len(s.Required) > 0 {
			t.Errorf("required: %v", s.Required)
		}
	},
}}

func TestSchema(t *testing.T) {
	for _, tc := range schemaCases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Schema(compile(t, tc.src, "#R"))
			if err != nil {
				t.Fatal(err)
			}
			assertStructural(t, s)
			tc.check(t, s)
		})
	}
}

func TestSchemaErrorsNamePath(t *testing.T) {
	for _, tc := range []struct{ name, src, path, want string }{
		{"conflict", `#R: spec?: {a?: {b?: int & string}}`, "#R", "#R.spec.a.b"},
		{"not a struct", `#R: int`, "#R", "#R"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Schema(compile(t, tc.src, tc.path))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func wantType(t *testing.T, s *apiextensionsv1.JSONSchemaProps, typ string) {
	t.Helper()
	if s.Type != typ {
		t.Errorf("want type %q, got %s", typ, dump(s))
	}
}

func wantEnum(t *testing.T, s *apiextensionsv1.JSONSchemaProps, values ...string) {
	t.Helper()
	var got []string
	for _, e := range s.Enum {
		got = append(got, string(e.Raw))
	}
	if !reflect.DeepEqual(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(values))) {
		t.Errorf("want enum %v, got %s", values, dump(s))
	}
}

func wantDefault(t *testing.T, s *apiextensionsv1.JSONSchemaProps, raw string) {
	t.Helper()
	if s.Default == nil || string(s.Default.Raw) != raw {
		t.Errorf("want default %s, got %s", raw, dump(s))
	}
}

func wantNum(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	if got == nil || *got != want {
		t.Errorf("%s: want %v, got %v", what, want, got)
	}
}

func wantInt(t *testing.T, what string, got *int64, want int64) {
	t.Helper()
	if got == nil || *got != want {
		t.Errorf("%s: want %v, got %v", what, want, got)
	}
}
