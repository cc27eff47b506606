package crdgen

import (
	"encoding/json"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/encoding/openapi"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// rootName is the definition under which a value is handed to the encoder.
const rootName = "Root"

// encode runs the CUE OpenAPI encoder on v and returns the schema it emits
// for v, with references expanded. ok is false if the encoder could not
// handle v (an unsupported construct, a cycle, or a panic); the caller then
// encodes v's children one by one, so that only the offending constraint is
// lost.
func encode(v cue.Value) (s *apiextensionsv1.JSONSchemaProps, ok bool) {
	if !acyclic(v, 0) {
		// The encoder does not always stop at a recursive definition.
		return nil, false
	}
	defer func() {
		if recover() != nil {
			s, ok = nil, false
		}
	}()
	ctx := v.Context()
	if ctx == nil {
		return nil, false
	}
	wrapper := ctx.CompileString("{}").FillPath(cue.MakePath(cue.Def("#"+rootName)), v)
	if wrapper.Err() != nil {
		return nil, false
	}
	f, err := openapi.Generate(wrapper, &openapi.Config{ExpandReferences: true})
	if err != nil {
		return nil, false
	}
	doc := ctx.BuildFile(f)
	root := doc.LookupPath(cue.MakePath(cue.Str("components"), cue.Str("schemas"), cue.Str(rootName)))
	if !root.Exists() {
		return nil, false
	}
	b, err := root.MarshalJSON()
	if err != nil {
		return nil, false
	}
	s = new(apiextensionsv1.JSONSchemaProps)
	if err := json.Unmarshal(b, s); err != nil {
		return nil, false
	}
	return s, true
}

// acyclic reports whether v can be handed to the encoder: it holds no
// structural cycle (a recursive definition) down to maxDepth.
func acyclic(v cue.Value, depth int) bool {
	if depth > maxDepth {
		return false
	}
	if err := v.Err(); err != nil {
		return !isCycle(err)
	}
	switch v.IncompleteKind() &^ cue.NullKind {
	case cue.StructKind:
		for _, a := range alternatives(v) {
			it, err := a.Fields(cue.Optional(true))
			if err != nil {
				continue
			}
			for it.Next() {
				if !acyclic(it.Value(), depth+1) {
					return false
				}
			}
			if p := a.LookupPath(cue.MakePath(cue.AnyString)); p.Exists() && !acyclic(p, depth+1) {
				return false
			}
		}
	case cue.ListKind:
		for _, a := range alternatives(v) {
			if it, err := a.List(); err == nil {
				for it.Next() {
					if !acyclic(it.Value(), depth+1) {
						return false
					}
				}
			}
			if e := a.LookupPath(cue.MakePath(cue.AnyIndex)); e.Exists() && !acyclic(e, depth+1) {
				return false
			}
		}
	}
	return true
}

// isCycle reports whether err is CUE's structural cycle error, which marks
// the point where CUE stops expanding a recursive definition.
func isCycle(err error) bool {
	return strings.Contains(err.Error(), "structural cycle")
}

// encodeConjuncts encodes the conjuncts of the scalar v one by one and
// combines what the encoder makes of those it can handle: each holds for
// every value of v, so their conjunction does too. It returns nil if the
// encoder handles none.
func encodeConjuncts(v cue.Value) *apiextensionsv1.JSONSchemaProps {
	var out *apiextensionsv1.JSONSchemaProps
	var visit func(x cue.Value, depth int)
	visit = func(x cue.Value, depth int) {
		if depth > 8 {
			return
		}
		if op, args := x.Expr(); op == cue.AndOp {
			for _, a := range args {
				visit(a, depth+1)
			}
			return
		}
		if s, ok := encode(x); ok {
			if out == nil {
				out = &apiextensionsv1.JSONSchemaProps{}
			}
			conjoin(out, s)
		}
	}
	visit(v, 0)
	return out
}

// conjoin adds the value validations of s to out: into out itself where
// out has none of them yet, otherwise as an allOf branch.
func conjoin(out, s *apiextensionsv1.JSONSchemaProps) {
	vals := apiextensionsv1.JSONSchemaProps{
		Enum: s.Enum, Pattern: s.Pattern, Format: s.Format,
		Minimum: s.Minimum, ExclusiveMinimum: s.ExclusiveMinimum,
		Maximum: s.Maximum, ExclusiveMaximum: s.ExclusiveMaximum,
		MultipleOf: s.MultipleOf, MinLength: s.MinLength, MaxLength: s.MaxLength,
		AllOf: s.AllOf, AnyOf: s.AnyOf, OneOf: s.OneOf, Not: s.Not,
	}
	clash := (len(out.Enum) > 0 && len(vals.Enum) > 0) ||
		(out.Pattern != "" && vals.Pattern != "") ||
		(out.Format != "" && vals.Format != "") ||
		(out.Minimum != nil && vals.Minimum != nil) ||
		(out.Maximum != nil && vals.Maximum != nil) ||
		(out.MultipleOf != nil && vals.MultipleOf != nil) ||
		(out.MinLength != nil && vals.MinLength != nil) ||
		(out.MaxLength != nil && vals.MaxLength != nil) ||
		(len(out.AnyOf) > 0 && len(vals.AnyOf) > 0) ||
		(len(out.OneOf) > 0 && len(vals.OneOf) > 0) ||
		(out.Not != nil && vals.Not != nil)
	if clash {
		out.AllOf = append(out.AllOf, vals)
		return
	}
	if len(vals.Enum) > 0 {
		out.Enum = vals.Enum
	}
	if vals.Pattern != "" {
		out.Pattern = vals.Pattern
	}
	if vals.Format != "" {
		out.Format = vals.Format
	}
	if vals.Minimum != nil {
		out.Minimum, out.ExclusiveMinimum = vals.Minimum, vals.ExclusiveMinimum
	}
	if vals.Maximum != nil {
		out.Maximum, out.ExclusiveMaximum = vals.Maximum, vals.ExclusiveMaximum
	}
	if vals.MultipleOf != nil {
		out.MultipleOf = vals.MultipleOf
	}
	if vals.MinLength != nil {
		out.MinLength = vals.MinLength
	}
	if vals.MaxLength != nil {
		out.MaxLength = vals.MaxLength
	}
	out.AllOf = append(out.AllOf, vals.AllOf...)
	if len(vals.AnyOf) > 0 {
		out.AnyOf = vals.AnyOf
	}
	if len(vals.OneOf) > 0 {
		out.OneOf = vals.OneOf
	}
	if vals.Not != nil {
		out.Not = vals.Not
	}
}
