package graph

import "github.com/converge-dev/converge/internal/graph/config"

// ConfigFromObject takes a name for error positions and one
// HyperConverged object as JSON, and gives a config built with the
// engine's CUE context (config.FromObject), ready for Render and Vet. It
// is LoadConfig for an object that arrives over the wire, as in an
// admission request, instead of from a file.
func (e *Engine) ConfigFromObject(name string, data []byte) (*config.Config, error) {
	defer e.Lock()()
	return config.FromObject(e.ctx, name, data)
}
