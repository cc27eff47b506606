package crdgen

import (
	"fmt"
	"strings"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// listBuiltins adds to s, the schema of the list v, the bounds of the list
// builtins among v's conjuncts (list.MinItems, list.MaxItems,
// list.UniqueItems), which the encoder drops or fails on.
func listBuiltins(s *apiextensionsv1.JSONSchemaProps, v cue.Value) {
	unique := func() {
		// uniqueItems is forbidden in CRDs; a set is its equivalent for
		// scalars.
		if s.Items != nil && s.Items.Schema != nil && isScalar(s.Items.Schema) && !s.Items.Schema.Nullable {
			s.XListType = ptr("set")
		}
	}
	var visit func(v cue.Value, depth int)
	visit = func(v cue.Value, depth int) {
		if depth > 8 {
			return
		}
		op, args := v.Expr()
		switch op {
		case cue.NoOp:
			if len(args) == 1 {
				if _, ok := v.Default(); ok {
					visit(args[0], depth+1)
				}
			}
		case cue.AndOp:
			for _, a := range args {
				visit(a, depth+1)
			}
		case cue.CallOp:
			if len(args) == 0 {
				return
			}
			var n int64
			if len(args) == 2 {
				var err error
				if n, err = args[1].Int64(); err != nil {
					return
				}
			}
			switch strings.TrimSuffix(fmt.Sprint(args[0]), "()") {
			case "list.MinItems":
				if len(args) == 2 && (s.MinItems == nil || *s.MinItems < n) {
					s.MinItems = ptr(n)
				}
			case "list.MaxItems":
				if len(args) == 2 && (s.MaxItems == nil || *s.MaxItems > n) {
					s.MaxItems = ptr(n)
				}
			case "list.UniqueItems":
				unique()
			}
		case cue.SelectorOp:
			// A reference to a definition of list builtins (#UniqueItems:
			// list.MaxItems(256) & list.UniqueItems()) prints as them.
			for _, part := range strings.Split(fmt.Sprint(v), " & ") {
				var n int64
				switch {
				case part == "list.UniqueItems()":
					unique()
				case scan(part, "list.MaxItems(%d)", &n) && (s.MaxItems == nil || *s.MaxItems > n):
					s.MaxItems = ptr(n)
				case scan(part, "list.MinItems(%d)", &n) && (s.MinItems == nil || *s.MinItems < n):
					s.MinItems = ptr(n)
				}
			}
		}
	}
	visit(v, 0)
}

// scan reports whether s is exactly format with one integer, read into n.
func scan(s, format string, n *int64) bool {
	var rest string
	k, _ := fmt.Sscanf(s+"\x00", format+"%s", n, &rest)
	return k == 2 && rest == "\x00"
}
