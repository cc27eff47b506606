package graph

import (
	"cuelang.org/go/cue"

	"github.com/converge-dev/converge/internal/graph/config"
)

// Warnings gives the warnings HCO's webhook returns for cfg's
// HyperConverged without refusing it (schema #Warnings: unknown,
// deprecated and discontinued feature gates, tuningPolicy highBurst, the
// ignored tekton namespaces), in schema order; nil when there are none or
// the HC cannot be evaluated (Vet and Render report that).
func (e *Engine) Warnings(cfg *config.Config) []string {
	defer e.Lock()()
	v := e.def("#Warnings").FillPath(cue.ParsePath("in"), cfg.HyperConverged).LookupPath(cue.ParsePath("out"))
	var out []string
	if err := v.Decode(&out); err != nil {
		return nil
	}
	return out
}
