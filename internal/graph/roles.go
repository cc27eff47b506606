package graph

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// RoleInputs are what a component's roles take besides the operand CR
// (#RolesOf in components/graph.cue).
type RoleInputs struct {
	// Namespace is where the namespaced objects go: the CR's own namespace
	// for a namespaced CR, the operator's for a cluster-scoped one.
	Namespace string `json:"namespace"`
	// Images are the image references the roles run, by name; "node" (the
	// converge-node image) is required.
	Images map[string]string `json:"images"`
	// Inputs, when not nil, are what the roles take from the cluster
	// besides the CR (#RolesOf inputs; operand.Inputs reads them). A value
	// that is an EmbeddedPackage is that package's value.
	Inputs map[string]any `json:"inputs,omitempty"`
}

// Roles is what a native operator derives from one operand CR.
type Roles struct {
	// Objects are the roles' objects in fluxcd/pkg/ssa's apply order (CRDs
	// and Namespaces first, then cluster-scoped RBAC, ServiceAccounts, …,
	// the workloads last), by namespace and name within a kind.
	Objects []*unstructured.Unstructured
	// Refusals name the CR's fields converge does not run, one sentence
	// each ("spec.<path>: <why>"); while there is one the operator applies
	// nothing.
	Refusals []string

	// shared are the objects of the Bundles the derivation named, the
	// engine's own (never changed): a derivation and the roles cache hold
	// them by reference, and materialize copies them into Objects for a
	// caller, so that a cache entry costs only the CR's own objects.
	shared []*unstructured.Unstructured
}

// RoleKinds lists the operand kinds that have roles (components/graph.cue
// Roles), sorted.
func (e *Engine) RoleKinds() []string {
	defer e.Lock()()
	var kinds []string
	it, err := e.graph.LookupPath(cue.ParsePath("Roles")).Fields()
	if err != nil {
		return nil
	}
	for it.Next() {
		kinds = append(kinds, it.Selector().Unquoted())
	}
	sort.Strings(kinds)
	return kinds
}

// Roles evaluates the roles definition of kind (components/graph.cue
// Roles[kind], a #RolesOf) for the CR cr: its apiVersion, kind, metadata
// (name, namespace, labels, annotations, generation) and spec are given
// to the definition, its status and managed fields are not. It gives the
// objects ordered for apply and the refusals. An error names the kind,
// the CR and the CUE path: a CR the definition cannot take (a field of the
// wrong type) or a definition that does not evaluate. A derivation of the
// same kind, CR (as the definition sees it), namespace, images and inputs
// comes from the engine's cache (rolesKey), copied; errors are not cached.
func (e *Engine) Roles(kind string, cr *unstructured.Unstructured, in RoleInputs) (*Roles, error) {
	defer e.Lock()()
	// Through JSON text, so that a YAML-decoded 10 (a float64) is the CUE
	// integer 10 that the definitions' int fields accept; the same text
	// keys the cache.
	b, err := json.Marshal(roleInput(cr))
	if err != nil {
		return nil, fmt.Errorf("roles of %s %s: %w", kind, crName(cr), err)
	}
	key, cacheable := rolesKey(e.cueDigest, kind, b, in)
	if cacheable {
		if r, ok := e.roles.get(key); ok {
			return r.materialize(), nil
		}
	}
	r, err := e.deriveRoles(kind, cr, b, in)
	if err != nil {
		return nil, err
	}
	if cacheable {
		e.roles.put(key, r)
	}
	return r.materialize(), nil
}

// deriveRoles is Roles without the cache, for cr whose roleInput is the
// JSON text b: the CR's own objects, unsorted, and the bundles' objects
// by reference (materialize gives what callers get). The caller holds the
// engine's lock.
func (e *Engine) deriveRoles(kind string, cr *unstructured.Unstructured, b []byte, in RoleInputs) (*Roles, error) {
	def := e.graph.LookupPath(cue.MakePath(cue.Str("Roles"), cue.Str(kind)))
	if !def.Exists() {
		return nil, fmt.Errorf("no roles for kind %s (components/graph.cue Roles)", kind)
	}
	what := kind + " " + crName(cr)
	v := def.FillPath(cue.ParsePath("cr"), e.ctx.CompileBytes(b, cue.Filename(what))).
		FillPath(cue.ParsePath("namespace"), in.Namespace).
		FillPath(cue.ParsePath("images"), e.ctx.Encode(in.Images))
	if in.Inputs != nil {
		data := make(map[string]any, len(in.Inputs))
		var pkgs []string
		for k, x := range in.Inputs {
			if _, ok := x.(EmbeddedPackage); ok {
				pkgs = append(pkgs, k)
				continue
			}
			data[k] = x
		}
		v = v.FillPath(cue.ParsePath("inputs"), e.ctx.Encode(data))
		sort.Strings(pkgs)
		for _, k := range pkgs {
			pv, err := e.embedded(in.Inputs[k].(EmbeddedPackage))
			if err != nil {
				return nil, fmt.Errorf("roles of %s: inputs.%s: %w", what, k, err)
			}
			v = v.FillPath(cue.MakePath(cue.Str("inputs"), cue.Str(k)), pv)
		}
	}
	if err := v.LookupPath(cue.ParsePath("cr")).Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, crError(kind, err))
	}
	out := &Roles{}
	if err := v.LookupPath(cue.ParsePath("refusals")).Decode(&out.Refusals); err != nil {
		return nil, fmt.Errorf("roles of %s: %w", what, Format(err))
	}
	objs, err := decodeObjects(v.LookupPath(cue.ParsePath("objects")))
	if err != nil {
		return nil, fmt.Errorf("roles of %s: %w", what, err)
	}
	out.Objects = objs
	var bundles []string
	if b := v.LookupPath(cue.ParsePath("bundles")); b.Exists() {
		if err := b.Decode(&bundles); err != nil {
			return nil, fmt.Errorf("roles of %s: %w", what, Format(err))
		}
	}
	for _, name := range bundles {
		objs, err := e.bundle(name)
		if err != nil {
			return nil, fmt.Errorf("roles of %s: %w", what, err)
		}
		out.shared = append(out.shared, objs...)
	}
	return out, nil
}

// materialize gives r as callers get it: its own objects and copies of
// the shared ones, in fluxcd/pkg/ssa's apply order. It takes over r's
// Objects, so r must be a copy (the roles cache gives copies).
func (r *Roles) materialize() *Roles {
	out := &Roles{Refusals: r.Refusals, Objects: r.Objects}
	for _, o := range r.shared {
		out.Objects = append(out.Objects, o.DeepCopy())
	}
	sort.Sort(ssa.SortableUnstructureds(out.Objects))
	return out
}

// bundle gives the objects of components/graph.cue Bundles.<name>,
// evaluated on first use and kept: they depend on nothing of a CR. The
// caller holds the engine's lock and copies what it hands out.
func (e *Engine) bundle(name string) ([]*unstructured.Unstructured, error) {
	if objs, ok := e.bundles[name]; ok {
		return objs, nil
	}
	v := e.graph.LookupPath(cue.MakePath(cue.Str("Bundles"), cue.Str(name)))
	if !v.Exists() {
		return nil, fmt.Errorf("no bundle %q (components/graph.cue Bundles)", name)
	}
	objs, err := decodeObjects(v)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", name, err)
	}
	if e.bundles == nil {
		e.bundles = map[string][]*unstructured.Unstructured{}
	}
	e.bundles[name] = objs
	return objs, nil
}

// roleInput is what a roles definition sees of cr.
func roleInput(cr *unstructured.Unstructured) map[string]any {
	md := map[string]any{"name": cr.GetName()}
	if ns := cr.GetNamespace(); ns != "" {
		md["namespace"] = ns
	}
	if l := cr.GetLabels(); len(l) > 0 {
		md["labels"] = l
	}
	if a := cr.GetAnnotations(); len(a) > 0 {
		md["annotations"] = a
	}
	if g := cr.GetGeneration(); g != 0 {
		md["generation"] = g
	}
	out := map[string]any{"apiVersion": cr.GetAPIVersion(), "kind": cr.GetKind(), "metadata": md}
	if spec, ok := cr.Object["spec"]; ok {
		out["spec"] = spec
	}
	return out
}

// crName is "namespace/name" or "name".
func crName(cr *unstructured.Unstructured) string {
	if cr.GetNamespace() != "" {
		return cr.GetNamespace() + "/" + cr.GetName()
	}
	return cr.GetName()
}

// crError formats an error of the CR against its roles definition with the
// CR's own paths ("spec.imagePullPolicy: …", not
// "Roles.KubeVirt.cr.spec.imagePullPolicy") and without the positions in
// the embedded CUE.
func crError(kind string, err error) error {
	prefix := "Roles." + kind + ".cr."
	var lines []string
	for _, l := range Format(err).(*Error).Lines {
		if i := strings.Index(l, prefix); i >= 0 {
			l = l[i+len(prefix):]
		}
		lines = append(lines, l)
	}
	return &Error{Lines: lines}
}

// decodeObjects decodes v, a struct of objects by key (a #RolesOf objects
// or a bundle), concrete, in field order; errors are CUE's, formatted.
func decodeObjects(v cue.Value) ([]*unstructured.Unstructured, error) {
	if err := v.Validate(cue.Concrete(true)); err != nil {
		return nil, Format(err)
	}
	it, err := v.Fields()
	if err != nil {
		return nil, Format(err)
	}
	var objs []*unstructured.Unstructured
	for it.Next() {
		var obj map[string]any
		if err := it.Value().Decode(&obj); err != nil {
			return nil, Format(err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
	return objs, nil
}
