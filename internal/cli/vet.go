package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/converge-dev/converge/internal/graph"
)

func newVet(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "vet PATH",
		Short: "Check a HyperConverged config (a directory or file) against the schema",
		Long: `vet loads the HyperConverged (and HostPathProvisioner, if any) from PATH
and checks it against converge's CUE schema: the fields, types, defaults
and validation rules of upstream HCO. Errors name file:line:column, the
field path and what is allowed. Warnings (deprecated or unknown feature
gates, ignored fields) go to stderr and do not fail the check. The same check is "cue vet ./schema FILE -d '#HyperConverged'".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := g.engineFor()
			if err != nil {
				return err
			}
			cfg, err := e.LoadConfig(args[0])
			if err != nil {
				return err
			}
			if err := e.Vet(cfg); err != nil {
				return err
			}
			// HCO's webhook warnings: the config is valid, but something in
			// it is ignored or deprecated.
			for _, w := range e.Warnings(cfg) {
				fmt.Fprintf(g.stderr, "warning: %s\n", w)
			}
			fmt.Fprintf(g.stdout, "%s: valid\n", args[0])
			return nil
		},
	}
}

// load reads the config at path and validates it; with derive it also
// renders the graph for the facts of --facts.
func (g *globals) load(path string, derive bool) (*graph.Rendered, error) {
	e, err := g.engineFor()
	if err != nil {
		return nil, err
	}
	cfg, err := e.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if !derive {
		return nil, e.Vet(cfg)
	}
	f, err := loadFacts(g.facts)
	if err != nil {
		return nil, err
	}
	return e.Render(cfg, f)
}
