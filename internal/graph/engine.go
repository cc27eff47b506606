// Package graph evaluates converge's CUE component graph: it validates a
// HyperConverged config against the schema, derives every component's
// objects for given cluster facts, applies the HC's jsonpatch annotations
// and orders the result into apply stages.
package graph

import (
	"context"
	"fmt"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge"
)

// Engine holds the evaluated CUE module. It is safe for concurrent use:
// renders are serialised because a cue.Context is not goroutine-safe.
type Engine struct {
	// sem is the engine's lock, a one-slot channel so that a waiter can
	// give up when its context ends (LockContext).
	sem      chan struct{}
	ctx      *cue.Context
	schema   cue.Value // package converge.dev/converge/schema
	graph    cue.Value // package converge.dev/converge/components
	crdsOnce sync.Once
	crds     []*CRD
	crdsErr  error
	// conversion, when set, makes CRDs with alsoServed versions serve them
	// through this conversion webhook (see EnableConversion).
	conversion *apiextensionsv1.WebhookClientConfig

	// normalized and derivation are the graph's #Normalized and
	// #Derivation, the two halves of #Graph a render evaluates (derive).
	normalized, derivation cue.Value
	// cueDigest is the SHA-256 of the embedded CUE module (cueDigest), a
	// part of every renderCache key.
	cueDigest [32]byte
	// cache keeps the last derivations (renderCache).
	cache *renderCache
	// roles keeps the last role derivations (Roles, rolesKey).
	roles *lru[*Roles]
	// packages are the embedded packages built on first use (embedded).
	packages map[EmbeddedPackage]cue.Value
	// tektonJSON is TektonTasksPackage's Tasks as JSON (tektonTasks).
	tektonJSON []byte
	// bundles are the role Bundles evaluated so far (bundle).
	bundles map[string][]*unstructured.Unstructured
}

// NewEngine loads and builds the embedded CUE module (schema and
// components). It fails only if the embedded CUE itself is broken.
func NewEngine() (*Engine, error) {
	ctx := cuecontext.New()
	insts := load.Instances([]string{"./schema", "./components"}, &load.Config{FS: converge.CUE, Dir: "/"})
	vals := make([]cue.Value, len(insts))
	for i, inst := range insts {
		if inst.Err != nil {
			return nil, fmt.Errorf("loading embedded CUE %s: %w", inst.ImportPath, inst.Err)
		}
		vals[i] = ctx.BuildInstance(inst)
		if err := vals[i].Err(); err != nil {
			return nil, fmt.Errorf("building embedded CUE %s: %w", inst.ImportPath, Format(err))
		}
	}
	digest, err := moduleDigest(converge.CUE)
	if err != nil {
		return nil, fmt.Errorf("reading embedded CUE: %w", err)
	}
	e := &Engine{sem: make(chan struct{}, 1), ctx: ctx, schema: vals[0], graph: vals[1],
		cueDigest: digest, cache: newRenderCache(DefaultRenderCacheSize),
		roles: newLRU(DefaultRolesCacheSize, (*Roles).clone)}
	e.normalized = e.graph.LookupPath(cue.MakePath(cue.Def("#Normalized")))
	e.derivation = e.graph.LookupPath(cue.MakePath(cue.Def("#Derivation")))
	return e, nil
}

// Lock takes the engine's lock and returns its release: a cue.Context is
// not safe for concurrent use.
func (e *Engine) Lock() func() {
	e.sem <- struct{}{}
	return func() { <-e.sem }
}

// LockContext is Lock giving up when ctx ends first, with ctx's error.
func (e *Engine) LockContext(ctx context.Context) (func(), error) {
	select {
	case e.sem <- struct{}{}:
		return func() { <-e.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// def returns the schema definition name (e.g. "#HyperConverged").
func (e *Engine) def(name string) cue.Value {
	return e.schema.LookupPath(cue.MakePath(cue.Def(name)))
}
