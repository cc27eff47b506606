package graph

import (
	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
	cuejson "cuelang.org/go/encoding/json"
)

// deriveFast is derive evaluating the graph in its two halves
// (components/graph.cue): #Normalized validates hc against the schema and
// gives the v1 HyperConverged, and #Derivation derives the rest from v1,
// the facts and the HPP handed over as plain data (see data), all at once
// in one unification. It checks what deriveGraph checks (TestDeriveFast
// compares the two) in a fraction of the time: with the schema's rules
// still attached, v1 has every component that takes it evaluate the
// HyperConverged schema again, and each FillPath of #Graph evaluates all
// of it again.
//
// Its errors lack the config's positions where the derivation meets
// them (v1 is plain data without positions): derive then asks
// deriveGraph for the error.
func (e *Engine) deriveFast(hc, hppDoc cue.Value, facts map[string]any) (*Rendered, error) {
	n := e.normalized.FillPath(cue.ParsePath("hc"), hc)
	if err := n.LookupPath(cue.ParsePath("hc")).Validate(cue.Concrete(true)); err != nil {
		return nil, Format(err)
	}
	v1, err := data(n.LookupPath(cue.ParsePath("v1")))
	if err != nil {
		return nil, err
	}
	fv, err := e.Facts(facts)
	if err != nil {
		return nil, err
	}
	fd, err := data(fv)
	if err != nil {
		return nil, err
	}
	inputs := []any{"v1", v1, "facts", fd}
	tasks, err := e.tektonTasks(fv)
	if err != nil {
		return nil, err
	}
	if tasks != nil {
		inputs = append(inputs, "tektonTasks", tasks)
	}
	if hppDoc.Exists() {
		hpp, err := e.validate(hppDoc, "#HostPathProvisioner")
		if err != nil {
			return nil, err
		}
		d, err := data(hpp)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, "hostPathProvisioner", d)
	}
	g := e.derivation.Unify(e.ctx.BuildExpr(ast.NewStruct(inputs...)))
	return decodeGraph(g, g.LookupPath(cue.ParsePath("v1")))
}

// data gives the concrete value of v as plain data, an expression to
// compile again: v's JSON export, without v's constraints, definitions or
// positions (an error about it would name a path of the graph's CUE, not a
// position of v). A value that is not concrete is an error, formatted as
// Format does.
func data(v cue.Value) (ast.Expr, error) {
	if err := v.Validate(cue.Concrete(true)); err != nil {
		return nil, Format(err)
	}
	b, err := v.MarshalJSON()
	if err != nil {
		return nil, Format(err)
	}
	expr, err := cuejson.Extract("", b)
	if err != nil {
		return nil, Format(err)
	}
	ast.Walk(expr, func(n ast.Node) bool { ast.SetPos(n, token.NoPos); return true }, nil)
	return expr, nil
}
