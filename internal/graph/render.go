package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"cuelang.org/go/cue"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/internal/graph/config"
)

// Node is one rendered component.
type Node struct {
	// Name is the component name (virt, cdi, cnao, ssp, hpp, hco, and
	// WorkloadsComponent when the config holds workloads).
	Name string
	// DependsOn names the components applied before this one.
	DependsOn []string
	// Objects are the derived objects in declaration order.
	Objects []*unstructured.Unstructured
}

// Rendered is the output of one render: every object converge applies,
// grouped by component and ordered into stages.
type Rendered struct {
	// CRDs are the generated CustomResourceDefinitions (stage 0).
	CRDs []*unstructured.Unstructured
	// Nodes are the components in a topological order.
	Nodes []Node
	// Stages are the apply stages: CRDs first, then one stage per
	// dependency level of Nodes. Objects within a stage are independent.
	Stages []Stage
	// HyperConverged is the validated, defaulted HC as applied.
	HyperConverged *unstructured.Unstructured
	// OwnedByHC holds the inventory IDs of objects that get a controller
	// ownerReference to the HC at apply time.
	OwnedByHC map[string]bool
	// Tainted lists the jsonpatch annotations in effect (each with ≥1 op).
	Tainted []string
	// Health maps a kind to its health rule: HealthKstatus,
	// HealthConditions, HealthNone, or one of the workload rules
	// (WorkloadHealth: HealthVirtualMachine, HealthDataVolume, ...).
	Health map[string]string
	// Version is the HCO-equivalent release (components/common Version).
	Version string
	// Operators is the operators mode the graph was derived for: "native"
	// (converge's operators run the operand CRs) or "external".
	Operators string
	// IgnoreRules are the graph's ignore rules (#Graph.ignore): fields
	// converge sets on create only. See IgnoreRule.
	IgnoreRules []IgnoreRule
}

// Stage is a set of objects applied together.
type Stage struct {
	// Name is "crds" or the names of the components in it, joined by "+".
	Name string
	// Nodes names the components of the stage, sorted; empty for "crds".
	Nodes   []string
	Objects []*unstructured.Unstructured
}

// Objects returns every object of every stage, in stage order.
func (r *Rendered) Objects() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, s := range r.Stages {
		out = append(out, s.Objects...)
	}
	return out
}

// HealthRule returns the health rule for kind: "kstatus" unless the graph
// says otherwise.
func (r *Rendered) HealthRule(kind string) string {
	if h, ok := r.Health[kind]; ok {
		return h
	}
	return "kstatus"
}

// Inputs are what a render takes besides the config.
type Inputs struct {
	// Facts is a YAML/JSON-decoded map with #ClusterFacts' field names;
	// nil for the defaults.
	Facts map[string]any
	// Operators is the operators mode a Sync selects (spec.operators):
	// "native", "external", or "" to leave it to the HyperConverged's
	// converge.dev/operators annotation (default native). When both are
	// set they must agree.
	Operators string
}

// Render validates cfg against the schema and derives the graph for facts
// (a YAML/JSON-decoded map with #ClusterFacts' field names; nil for the
// defaults), the mode coming from the HC alone. It is RenderWith with
// Inputs{Facts: facts}.
func (e *Engine) Render(cfg *config.Config, facts map[string]any) (*Rendered, error) {
	return e.RenderWith(cfg, Inputs{Facts: facts})
}

// RenderWith validates cfg against the schema and derives the graph for
// in. The operators mode (in.Operators, else the HC's
// OperatorsAnnotation, else native) is written into the HyperConverged's
// annotation before anything reads it, so the applied HC names its mode
// and the hco-webhook judges it as the render did. Errors are *Error
// values naming file:line:col and CUE path, or the HC field and why the
// mode refuses it. The config's workloads are checked as the cluster's
// admission and controllers would check them (checkWorkload) and form the
// WorkloadsComponent node, after every other; a problem with any of them
// fails the render, naming file:line:col, the object and the field path.
// RenderWith never returns a partial result: nothing of a config that
// fails is applied.
func (e *Engine) RenderWith(cfg *config.Config, in Inputs) (*Rendered, error) {
	return e.RenderContext(context.Background(), cfg, in)
}

// RenderContext is RenderWith returning as soon as ctx ends, with an
// error wrapping ctx's (a Sync's spec.timeout, a signal to the CLI). A
// render waiting for the engine's lock gives up then; one already
// evaluating cannot be interrupted (CUE evaluation takes no context) and
// finishes in the background, holding the lock until it does, its result
// dropped: the loader's and the schema's bounds keep that short.
func (e *Engine) RenderContext(ctx context.Context, cfg *config.Config, in Inputs) (*Rendered, error) {
	return whileRunning(ctx, "render", func() (*Rendered, error) { return e.render(ctx, cfg, in) })
}

// whileRunning runs f in a goroutine and returns its result, or an error
// naming what and wrapping ctx's as soon as ctx ends.
func whileRunning[T any](ctx context.Context, what string, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("%s stopped: %w", what, context.Cause(ctx))
	}
}

func (e *Engine) render(ctx context.Context, cfg *config.Config, in Inputs) (*Rendered, error) {
	crds, err := e.CRDs()
	if err != nil {
		return nil, err
	}
	unlock, err := e.LockContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("render stopped: %w", err)
	}
	defer unlock()

	hc, err := withMode(cfg.HyperConverged, in.Operators)
	if err != nil {
		return nil, err
	}
	if err := checkListBounds(hc); err != nil {
		return nil, err
	}
	r, err := e.derive(hc, cfg.HostPathProvisioner, in.Facts)
	if err != nil {
		return nil, err
	}
	for _, c := range crds {
		r.CRDs = append(r.CRDs, c.Object.DeepCopy())
	}
	if err := r.order(); err != nil {
		return nil, err
	}
	if err := e.addWorkloads(cfg, r); err != nil {
		return nil, err
	}
	return r, nil
}

// derive validates the HC document hc (its operators mode written by
// withMode) and the HPP document hppDoc (when it exists) and derives the
// graph for them and facts: the nodes, unordered, and the rest of the
// graph's output, without the CRDs and the workloads. A derivation of the
// same inputs (renderKey) comes from the engine's cache; otherwise the
// graph is evaluated in its two halves (deriveFast) and, when that fails,
// as a whole (deriveGraph), whose error names the config's file, line and
// field path as a render always has. Errors are not cached: they name
// files.
func (e *Engine) derive(hc, hppDoc cue.Value, facts map[string]any) (*Rendered, error) {
	key, cacheable := renderKey(e.cueDigest, hc, hppDoc, facts)
	if cacheable {
		if r, ok := e.cache.get(key); ok {
			return r, nil
		}
	}
	r, err := e.deriveFast(hc, hppDoc, facts)
	if err != nil {
		if r, err = e.deriveGraph(hc, hppDoc, facts); err != nil {
			return nil, err
		}
	}
	if cacheable {
		e.cache.put(key, r)
	}
	return r, nil
}

// deriveGraph is derive by evaluating #Graph as a whole with hc, facts and
// hppDoc: the HC's schema errors name the config's paths and positions,
// and an error of the derivation names the config's position of the value
// it concerns. It takes several times deriveFast's time.
func (e *Engine) deriveGraph(hc, hppDoc cue.Value, facts map[string]any) (*Rendered, error) {
	// The graph gets the document as written and unifies it with
	// #HyperConverged itself, once: validating it separately first would
	// evaluate the schema twice (and unifying an already-validated value
	// with the schema again makes some rules, the Custom TLS profile's,
	// explode in evaluation time). Only when the graph's hc is invalid is
	// the document validated on its own, for errors with the user's paths
	// (spec.…, not #Graph.hc.spec.…).
	g := e.graph.LookupPath(cue.MakePath(cue.Def("#Graph"))).FillPath(cue.ParsePath("hc"), hc)
	if err := g.LookupPath(cue.ParsePath("hc")).Validate(cue.Concrete(true)); err != nil {
		if _, verr := e.validate(hc, "#HyperConverged"); verr != nil {
			return nil, verr
		}
		return nil, Format(err)
	}
	fv, err := e.Facts(facts)
	if err != nil {
		return nil, err
	}
	g = g.FillPath(cue.ParsePath("facts"), fv)
	tasks, err := e.tektonTasks(fv)
	if err != nil {
		return nil, err
	}
	if tasks != nil {
		g = g.FillPath(cue.ParsePath("tektonTasks"), e.ctx.BuildExpr(tasks))
	}
	if hppDoc.Exists() {
		hpp, err := e.validate(hppDoc, "#HostPathProvisioner")
		if err != nil {
			return nil, err
		}
		g = g.FillPath(cue.ParsePath("hostPathProvisioner"), hpp)
	}
	return decodeGraph(g, g.LookupPath(cue.ParsePath("v1")))
}

// Facts validates facts against #ClusterFacts and returns them with the
// defaults filled in.
func (e *Engine) Facts(facts map[string]any) (cue.Value, error) {
	v := e.def("#ClusterFacts")
	if facts != nil {
		// Through JSON text, so that a YAML-decoded 3 (a float64) is the CUE
		// integer 3 that #ClusterFacts' int fields accept.
		b, err := json.Marshal(facts)
		if err != nil {
			return cue.Value{}, fmt.Errorf("cluster facts: %w", err)
		}
		v = v.Unify(e.ctx.CompileBytes(b, cue.Filename("facts")))
	}
	if err := v.Validate(cue.Concrete(true)); err != nil {
		return cue.Value{}, Format(fmt.Errorf("cluster facts: %w", err))
	}
	return v, nil
}

// LoadConfig loads the config at path (package config) with the engine's
// CUE context, which values given to Render and Vet must share.
func (e *Engine) LoadConfig(path string) (*config.Config, error) {
	defer e.Lock()()
	return config.Load(e.ctx, path)
}

// LoadDocuments is LoadConfig without requiring a HyperConverged
// (config.LoadDocuments), for Vet of workloads alone.
func (e *Engine) LoadDocuments(path string) (*config.Config, error) {
	defer e.Lock()()
	return config.LoadDocuments(e.ctx, path)
}

// Vet validates cfg: its HyperConverged and HostPathProvisioner against
// the schema and then, when it holds a HyperConverged or workloads,
// renders it (default facts; the config's HyperConverged, or
// DefaultHyperConverged when it has none) so that the derivation runs as
// a Sync's does — the HC's jsonpatch annotations applied to the operand
// CRs, every workload checked — and what Vet accepts, a Sync applies.
func (e *Engine) Vet(cfg *config.Config) error {
	return e.VetContext(context.Background(), cfg)
}

// VetContext is Vet returning as soon as ctx ends, as RenderContext.
func (e *Engine) VetContext(ctx context.Context, cfg *config.Config) error {
	_, err := whileRunning(ctx, "vet", func() (struct{}, error) { return struct{}{}, e.vet(ctx, cfg) })
	return err
}

func (e *Engine) vet(ctx context.Context, cfg *config.Config) error {
	if err := e.vetStack(cfg); err != nil {
		return err
	}
	if len(cfg.Workloads) == 0 && !cfg.HyperConverged.Exists() {
		return nil
	}
	c := *cfg
	if !c.HyperConverged.Exists() {
		hc, err := e.defaultHyperConverged()
		if err != nil {
			return err
		}
		c.HyperConverged = hc
	}
	_, err := e.render(ctx, &c, Inputs{})
	return err
}

func (e *Engine) vetStack(cfg *config.Config) error {
	defer e.Lock()()
	if cfg.HyperConverged.Exists() {
		if _, err := e.validate(cfg.HyperConverged, "#HyperConverged"); err != nil {
			return err
		}
	}
	if cfg.HostPathProvisioner.Exists() {
		if _, err := e.validate(cfg.HostPathProvisioner, "#HostPathProvisioner"); err != nil {
			return err
		}
	}
	return nil
}

// DefaultHyperConverged is the HyperConverged Vet renders workloads with
// when the config holds none: HCO's defaults, in HCO's namespace.
const DefaultHyperConverged = `apiVersion: "hco.kubevirt.io/v1beta1"
kind:       "HyperConverged"
metadata: {name: "kubevirt-hyperconverged", namespace: "kubevirt-hyperconverged"}
spec: {}
`

func (e *Engine) defaultHyperConverged() (cue.Value, error) {
	defer e.Lock()()
	v := e.ctx.CompileString(DefaultHyperConverged, cue.Filename("default HyperConverged"))
	return v, v.Err()
}

func (e *Engine) validate(doc cue.Value, def string) (cue.Value, error) {
	if err := checkListBounds(doc); err != nil {
		return cue.Value{}, err
	}
	v := doc.Unify(e.def(def))
	if err := v.Validate(cue.Concrete(true)); err != nil {
		return cue.Value{}, Format(err)
	}
	return v, nil
}

// decodeGraph decodes the evaluated graph g, whose v1 HyperConverged is
// hc: its nodes (unordered), the HyperConverged, and the rest of the
// graph's output; it fails with the graph's refusals or errors.
func decodeGraph(g, hc cue.Value) (*Rendered, error) {
	var refusals []string
	if err := g.LookupPath(cue.ParsePath("refusals")).Decode(&refusals); err != nil {
		return nil, Format(err)
	}
	if len(refusals) > 0 {
		return nil, &Error{Lines: refusals}
	}
	if err := g.LookupPath(cue.ParsePath("nodes")).Validate(cue.Concrete(true)); err != nil {
		return nil, Format(err)
	}
	var health map[string]string
	if err := g.LookupPath(cue.ParsePath("health")).Decode(&health); err != nil {
		return nil, Format(err)
	}
	r := &Rendered{Health: health, OwnedByHC: map[string]bool{}}
	if err := g.LookupPath(cue.ParsePath("version")).Decode(&r.Version); err != nil {
		return nil, Format(err)
	}
	if err := g.LookupPath(cue.ParsePath("mode")).Decode(&r.Operators); err != nil {
		return nil, Format(err)
	}
	rules, err := decodeIgnore(g)
	if err != nil {
		return nil, err
	}
	r.IgnoreRules = rules
	annotations := map[string]string{}
	_ = hc.LookupPath(cue.ParsePath("metadata.annotations")).Decode(&annotations)

	nodes := g.LookupPath(cue.ParsePath("nodes"))
	it, err := nodes.Fields()
	if err != nil {
		return nil, Format(err)
	}
	for it.Next() {
		name := it.Selector().String()
		n, err := decodeNode(name, it.Value(), annotations, r)
		if err != nil {
			return nil, err
		}
		r.Nodes = append(r.Nodes, n)
	}
	var hcObj map[string]any
	if err := hc.Decode(&hcObj); err != nil {
		return nil, Format(err)
	}
	delete(hcObj, "status")
	r.HyperConverged = &unstructured.Unstructured{Object: hcObj}
	sort.Strings(r.Tainted)
	return r, nil
}
