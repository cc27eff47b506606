package graph

import (
	"fmt"
	"os"

	cueyaml "cuelang.org/go/encoding/yaml"
)

// FactsFile reads the facts file at path (YAML or JSON, #ClusterFacts'
// field names: platform, controlPlaneNodes, workerNodes, …), checks it
// against #ClusterFacts and gives the facts as Inputs.Facts takes them.
// Its errors name the file, the line and the field and say what was
// expected ("facts.yaml:2:18: tektonPipelines: conflicting values "yes"
// and bool"), which a check of the decoded map could not.
func (e *Engine) FactsFile(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	defer e.Lock()()
	f, err := cueyaml.Extract(path, b)
	if err != nil {
		return nil, fmt.Errorf("facts file %s: %w", path, Format(err))
	}
	doc := e.ctx.BuildFile(f)
	if err := doc.Err(); err != nil {
		return nil, fmt.Errorf("facts file %s: %w", path, Format(err))
	}
	if _, err := e.validate(doc, "#ClusterFacts"); err != nil {
		return nil, err
	}
	// The file as written, not with #ClusterFacts' defaults: the render
	// applies those.
	facts := map[string]any{}
	if err := doc.Decode(&facts); err != nil {
		return nil, fmt.Errorf("facts file %s: %w", path, Format(err))
	}
	return facts, nil
}
