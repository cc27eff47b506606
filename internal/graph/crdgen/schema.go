package crdgen

import (
	"fmt"
	"strings"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// maxDepth bounds the nesting the converter follows; deeper values (only
// reachable through pathological recursion) preserve unknown fields.
const maxDepth = 100

// Schema returns just the structural OpenAPI v3 schema of def (used by
// Generate): the openAPIV3Schema of a CRD version for objects that satisfy
// the CUE definition def, which must be a struct. The schema is never
// stricter than def: constraints that cannot be expressed are dropped.
// Errors name the CUE path that could not be converted.
func Schema(def cue.Value) (*apiextensionsv1.JSONSchemaProps, error) {
	if !def.Exists() {
		return nil, fmt.Errorf("crdgen: %s: definition does not exist", pathOf(def))
	}
	if err := def.Err(); err != nil {
		return nil, fmt.Errorf("crdgen: %s: %v", pathOf(def), err)
	}
	if k := def.IncompleteKind(); k != cue.StructKind {
		return nil, fmt.Errorf("crdgen: %s: is %v, not a struct", pathOf(def), k)
	}
	s, err := node(def, nil, false, rootField, 0)
	if err != nil {
		return nil, err
	}
	fixRoot(s)
	dropInvalidDefaults(s)
	return s, nil
}

// fieldKind says how a value is reached from its parent; it decides
// whether the value is required and whether it is defaulted.
type fieldKind int

const (
	rootField     fieldKind = iota // the definition itself
	regularField                   // a: T
	optionalField                  // a?: T
	requiredField                  // a!: T
	elementField                   // a list element, map value or disjunct
)

func fieldKindOf(t cue.SelectorType) fieldKind {
	switch t.ConstraintType() {
	case cue.OptionalConstraint:
		return optionalField
	case cue.RequiredConstraint:
		return requiredField
	}
	return regularField
}

// node converts v into a structural schema. oas is the encoder's schema
// for v; covered says whether the encoder ran on v or an ancestor of v (if
// not, node runs it on v). fk is how v is reached from its parent.
func node(v cue.Value, oas *apiextensionsv1.JSONSchemaProps, covered bool, fk fieldKind, depth int) (*apiextensionsv1.JSONSchemaProps, error) {
	if depth > maxDepth {
		return anything(), nil
	}
	whole := v
	if err := v.Err(); err != nil {
		switch {
		case isCycle(err):
			// A recursive definition: CUE stops expanding it here, and so
			// do we. Any value is accepted below this point.
			return anything(), nil
		case v.Validate() != nil:
			return nil, fmt.Errorf("crdgen: %s: %v", pathOf(v), err)
		}
		// An incomplete error: a validator rejected the value CUE assumes
		// for a schema (such as [] for list.MinItems(1)). The structure
		// comes from the other conjuncts.
		v = withoutValidators(v)
	}
	if !covered && tooLargeToEncode(v) {
		// The encoder's cost grows faster than the value (it re-evaluates
		// each struct it visits): a large struct, such as the spec of a
		// KubeVirt VirtualMachineInstance with the core/v1 types it
		// embeds, takes minutes whole and seconds field by field. Its
		// children are encoded one by one instead; only struct-level
		// constraints of the large struct itself are lost (the encoder's
		// oneOf of a disjunction of large structs).
	} else if !covered {
		oas, covered = encode(v)
		if !covered {
			// The encoder fails on some values with a default (such as
			// int & >=1 | *5) that it handles without one.
			nd := withoutDefault(v)
			if nd != v {
				oas, covered = encode(nd)
			}
			if !covered && isScalarKind(nd.IncompleteKind()) {
				// Keep what the encoder can say about each conjunct.
				oas, covered = encodeConjuncts(nd), true
			}
		}
	}

	kind := v.IncompleteKind()
	s := &apiextensionsv1.JSONSchemaProps{
		Description: docOf(v),
		Nullable:    kind&cue.NullKind != 0 && kind != cue.NullKind && kind != cue.TopKind,
	}
	switch kind &^ cue.NullKind {
	case cue.BoolKind:
		s.Type = "boolean"
	case cue.StringKind:
		s.Type = "string"
	case cue.BytesKind:
		s.Type, s.Format = "string", "byte"
	case cue.IntKind:
		s.Type = "integer"
	case cue.FloatKind, cue.NumberKind:
		s.Type = "number"
	case cue.IntKind | cue.StringKind:
		s.XIntOrString = true
	case cue.StructKind:
		if err := object(s, v, oas, covered, depth); err != nil {
			return nil, err
		}
	case cue.ListKind:
		if err := array(s, v, oas, covered, depth); err != nil {
			return nil, err
		}
		listBuiltins(s, whole)
	case cue.BottomKind: // just null
		s.Nullable = true
		s.XPreserveUnknownFields = ptr(true)
	default: // top, or a mix of kinds that a structural schema cannot type
		s.XPreserveUnknownFields = ptr(true)
	}
	applyValidations(s, oas)
	s.Default = defaultOf(whole, fk)
	if s.Nullable && len(s.Enum) > 0 {
		// The API server checks null against the enum and rejects it even
		// if the enum lists null. Without nullable it drops a null before
		// validation instead, which is as good as CUE's null.
		s.Nullable = false
	}
	return s, nil
}

// isScalarKind reports whether k, less null, is one scalar kind.
func isScalarKind(k cue.Kind) bool {
	switch k &^ cue.NullKind {
	case cue.BoolKind, cue.StringKind, cue.BytesKind, cue.IntKind, cue.FloatKind, cue.NumberKind:
		return true
	}
	return false
}

// maxEncodeFields is the number of fields (counted through every level)
// above which a struct or list is not handed to the encoder whole.
const maxEncodeFields = 10

// tooLargeToEncode reports whether the struct or list v holds more than
// maxEncodeFields fields at any depth.
func tooLargeToEncode(v cue.Value) bool {
	n := 0
	var count func(x cue.Value, depth int) bool
	count = func(x cue.Value, depth int) bool {
		if depth > maxDepth || x.Err() != nil {
			return false
		}
		switch x.IncompleteKind() &^ cue.NullKind {
		case cue.StructKind:
			it, err := x.Fields(cue.Optional(true))
			if err != nil {
				return false
			}
			for it.Next() {
				if n++; n > maxEncodeFields || count(it.Value(), depth+1) {
					return true
				}
			}
			if p := x.LookupPath(cue.MakePath(cue.AnyString)); p.Exists() {
				return count(p, depth+1)
			}
		case cue.ListKind:
			if e := x.LookupPath(cue.MakePath(cue.AnyIndex)); e.Exists() {
				return count(e, depth+1)
			}
		}
		return false
	}
	return count(v, 0)
}

// anything returns the schema of a value of any type.
func anything() *apiextensionsv1.JSONSchemaProps {
	return &apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true)}
}

// docOf returns the doc comments of v as a description.
func docOf(v cue.Value) string {
	var parts []string
	for _, cg := range v.Doc() {
		if t := strings.TrimSpace(cg.Text()); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n\n")
}

// pathOf returns the CUE path of v for error messages.
func pathOf(v cue.Value) string {
	if p := v.Path().String(); p != "" {
		return p
	}
	return "<root>"
}

func ptr[T any](v T) *T { return &v }
