package graph

import (
	"cuelang.org/go/cue"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/reconciler/inventory"
)

// decodeNode decodes one graph node: its objects (with the jsonpatch
// annotations applied) and dependencies; it records owned and tainted
// objects in r.
func decodeNode(name string, v cue.Value, annotations map[string]string, r *Rendered) (Node, error) {
	n := Node{Name: name}
	if err := v.LookupPath(cue.ParsePath("dependsOn")).Decode(&n.DependsOn); err != nil {
		return n, Format(err)
	}
	var patches map[string]string
	if err := v.LookupPath(cue.ParsePath("jsonpatch")).Decode(&patches); err != nil {
		return n, Format(err)
	}
	owned := map[string]bool{}
	var ownedKeys []string
	if err := v.LookupPath(cue.ParsePath("ownedByHC")).Decode(&ownedKeys); err != nil {
		return n, Format(err)
	}
	for _, k := range ownedKeys {
		owned[k] = true
	}
	it, err := v.LookupPath(cue.ParsePath("objects")).Fields()
	if err != nil {
		return n, Format(err)
	}
	for it.Next() {
		key := it.Selector().Unquoted()
		var obj map[string]any
		if err := it.Value().Decode(&obj); err != nil {
			return n, Format(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if ann, ok := patches[key]; ok && annotations[ann] != "" {
			applied, err := applyJSONPatch(u, ann, annotations[ann])
			if err != nil {
				return n, err
			}
			if applied {
				r.Tainted = append(r.Tainted, ann)
			}
		}
		if owned[key] {
			r.OwnedByHC[inventory.ID(u)] = true
		}
		n.Objects = append(n.Objects, u)
	}
	return n, nil
}
