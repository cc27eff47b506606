package crdgen

import (
	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// merged fills s with a schema that accepts every alternative of a
// disjunction of structs or lists.
func merged(s *apiextensionsv1.JSONSchemaProps, alts []cue.Value, depth int) error {
	var acc *apiextensionsv1.JSONSchemaProps
	for _, a := range alts {
		as, err := node(a, nil, false, elementField, depth+1)
		if err != nil {
			return err
		}
		acc = mergeLoose(acc, as)
	}
	desc, nullable := s.Description, s.Nullable
	*s = *acc
	s.Description, s.Nullable = desc, nullable || acc.Nullable
	return nil
}

// alternatives returns the disjuncts of v that are neither null nor errors,
// with the default marker removed, or v itself if v is no disjunction.
func alternatives(v cue.Value) []cue.Value {
	whole := v
	op, args := v.Expr()
	if op == cue.NoOp && len(args) == 1 {
		// v has a default: Expr shows it without the default disjunct,
		// which the other disjuncts may still allow.
		if _, ok := v.Default(); ok {
			v = args[0]
			op, args = v.Expr()
		}
	}
	if op != cue.OrOp {
		return []cue.Value{v}
	}
	var out []cue.Value
	for _, a := range args {
		if a.Err() != nil || a.IncompleteKind() == cue.NullKind {
			continue
		}
		// A bare disjunct has lost the closedness of its definition;
		// unified with the whole it has it back, unless that leaves the
		// disjunction ambiguous.
		u := whole.Unify(a)
		if u.Err() != nil {
			continue
		}
		if !resolved(u) {
			u = a
		}
		out = append(out, u)
	}
	return out
}

// resolved reports whether u is no longer a disjunction whose structure
// is ambiguous.
func resolved(u cue.Value) bool {
	if op, _ := u.Expr(); op == cue.OrOp {
		return false
	}
	// A value that still has a default shows the default's structure
	// (a struct's fields, a list's elements), not the disjunct's.
	if u.IncompleteKind()&(cue.StructKind|cue.ListKind) != 0 {
		if _, ok := u.Default(); ok {
			return false
		}
	}
	if u.IncompleteKind()&cue.StructKind != 0 {
		if _, err := u.Fields(cue.Optional(true)); err != nil {
			return false
		}
	}
	return true
}

// withoutDefault returns v without its default disjunct, or v if it has
// none.
func withoutDefault(v cue.Value) cue.Value {
	if _, ok := v.Default(); !ok {
		return v
	}
	if op, args := v.Expr(); op == cue.NoOp && len(args) == 1 {
		return args[0]
	}
	return v
}

// withoutValidators returns the conjunction of the conjuncts of v that are
// not validator calls, or v if there are none.
func withoutValidators(v cue.Value) cue.Value {
	var base cue.Value
	found := false
	var visit func(x cue.Value, depth int)
	visit = func(x cue.Value, depth int) {
		if depth > 8 {
			return
		}
		switch op, args := x.Expr(); op {
		case cue.AndOp:
			for _, a := range args {
				visit(a, depth+1)
			}
		case cue.CallOp:
		default:
			if found {
				base = base.Unify(x)
			} else {
				base, found = x, true
			}
		}
	}
	visit(v, 0)
	if !found || base.Err() != nil {
		return v
	}
	return base
}
