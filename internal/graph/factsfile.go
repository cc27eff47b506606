package graph

import (
	"fmt"
	"os"

	cueyaml "cuelang.org/go/encoding/yaml"
)

// CheckFactsFile checks the facts file at path (YAML or JSON, as
// facts.Load reads it) against #ClusterFacts and gives nil when it holds
// valid facts. Its errors name the file, the line and the field and say
// what was expected ("facts.yaml:2:18: tektonPipelines: conflicting
// values "yes" and bool"), which Facts, given the decoded map, cannot.
func (e *Engine) CheckFactsFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("facts: %w", err)
	}
	defer e.Lock()()
	f, err := cueyaml.Extract(path, b)
	if err != nil {
		return fmt.Errorf("facts file %s: %w", path, Format(err))
	}
	doc := e.ctx.BuildFile(f)
	if err := doc.Err(); err != nil {
		return fmt.Errorf("facts file %s: %w", path, Format(err))
	}
	if _, err := e.validate(doc, "#ClusterFacts"); err != nil {
		return err
	}
	return nil
}
