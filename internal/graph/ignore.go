package graph

import (
	"cuelang.org/go/cue"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// IgnoreRule names fields of some objects that another field manager
// owns once the object exists (an HPA's replicas, a value an operator or
// a webhook writes back into a CR), as Flux's spec.ignore and Argo CD's
// ignoreDifferences with RespectIgnoreDifferences. The graph declares
// them in #Graph.ignore (components/graph.cue).
//
// Semantics, applied by reconciler.Pipeline: when converge creates the
// object it sets the fields as rendered; once the object exists converge
// never changes them again. For each path of an existing object: when
// the live object has no value there, converge leaves it absent; when
// another field manager owns it, converge leaves it out of its apply (so
// SSA drops converge's ownership and keeps the other manager's value);
// when only converge owns it, converge applies the live value (so the
// value is not deleted before anyone else takes it over). A change by
// another manager at an ignored path is therefore never reverted and
// never reported as drift. A change to the rendered value of an ignored
// path after creation is not applied either.
type IgnoreRule struct {
	// Kind is the object kind the rule applies to (required).
	Kind string `json:"kind"`
	// Name limits the rule to objects of that name; empty for all.
	Name string `json:"name,omitempty"`
	// Namespace limits the rule to objects in that namespace; empty for
	// all.
	Namespace string `json:"namespace,omitempty"`
	// Paths are RFC 6901 JSON pointers through object fields (no list
	// indexes), e.g. "/spec/replicas" or "/metadata/annotations/deployOVS".
	Paths []string `json:"paths"`
}

// Matches reports whether the rule applies to u.
func (ir IgnoreRule) Matches(u *unstructured.Unstructured) bool {
	return ir.Kind == u.GetKind() &&
		(ir.Name == "" || ir.Name == u.GetName()) &&
		(ir.Namespace == "" || ir.Namespace == u.GetNamespace())
}

// IgnorePaths returns the JSON pointers of every rule of r matching u, in
// rule order; nil when none matches.
func (r *Rendered) IgnorePaths(u *unstructured.Unstructured) []string {
	var out []string
	for _, ir := range r.IgnoreRules {
		if ir.Matches(u) {
			out = append(out, ir.Paths...)
		}
	}
	return out
}

// decodeIgnore decodes #Graph.ignore.
func decodeIgnore(g cue.Value) ([]IgnoreRule, error) {
	v := g.LookupPath(cue.ParsePath("ignore"))
	if !v.Exists() {
		return nil, nil
	}
	var rules []IgnoreRule
	if err := v.Decode(&rules); err != nil {
		return nil, Format(err)
	}
	return rules, nil
}
