package config

import (
	"fmt"

	"cuelang.org/go/cue"
	"cuelang.org/go/encoding/json"
)

// FromObject takes a CUE context, a name that stands for the file in
// error positions, and one HyperConverged object as JSON (e.g. the object
// of an admission request), and gives a config holding it as its
// HyperConverged, so that errors read `name:line:col: path: message` as
// Load's do. It accepts apiVersion hco.kubevirt.io/v1beta1 and v1 (the
// schema decides the rest) and fails on invalid JSON or another kind.
func FromObject(ctx *cue.Context, name string, data []byte) (*Config, error) {
	expr, err := json.Extract(name, data)
	if err != nil {
		return nil, err
	}
	v := ctx.BuildExpr(expr)
	if err := v.Err(); err != nil {
		return nil, err
	}
	av, _ := v.LookupPath(cue.ParsePath("apiVersion")).String()
	k, _ := v.LookupPath(cue.ParsePath("kind")).String()
	switch av + "/" + k {
	case KindHyperConverged, KindHyperConvergedV1:
		return &Config{HyperConverged: v, Files: []string{name}}, nil
	}
	return nil, fmt.Errorf("%s: apiVersion %q kind %q is not a HyperConverged (hco.kubevirt.io/v1beta1 or v1)", name, av, k)
}
