package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/converge-dev/converge/internal/graph"
)

func newVet(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "vet FILE|DIR",
		Short: "Check a config (a directory or file): the HyperConverged against the schema, the workloads as the cluster would",
		Long: `vet loads every document of FILE (or of every *.yaml, *.yml and *.json
file directly in DIR): the HyperConverged and HostPathProvisioner, if
any, and the workloads (VirtualMachines, VirtualMachineInstances,
DataVolumes, NetworkAttachmentDefinitions, instancetypes and preferences,
Namespaces, Secrets, ConfigMaps).

The HyperConverged is checked against converge's CUE schema: the fields,
types, defaults and validation rules of upstream HCO (the same check is
"cue vet ./schema FILE -d '#HyperConverged'"). Warnings (deprecated or
unknown feature gates, ignored fields) go to stderr and do not fail the
check.

The workloads get the checks a Sync runs before it applies anything: the
API server's checks of metadata, the upstream types (a misspelt or
mistyped field is refused), the VM validation webhook's (the part of the
VMI spec converge runs), the DataVolume controller's (sources and size)
and the NetworkAttachmentDefinition's CNI configuration as the scheduler
and the node agent read it. For that vet renders the config with default
cluster facts (with HCO's default HyperConverged when PATH holds none).
A document of any other kind is refused. What vet accepts, a Sync
applies; what it refuses, a Sync refuses too.

Errors name file:line:column, the object, the field path and why.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := g.engineFor()
			if err != nil {
				return err
			}
			cfg, err := e.LoadDocuments(args[0])
			if err != nil {
				return err
			}
			if !cfg.HyperConverged.Exists() && !cfg.HostPathProvisioner.Exists() && len(cfg.Workloads) == 0 {
				return fmt.Errorf("%s: nothing to check: no HyperConverged, HostPathProvisioner or workload in %s", args[0], strings.Join(cfg.Files, ", "))
			}
			if err := e.VetContext(cmd.Context(), cfg); err != nil {
				return err
			}
			// HCO's webhook warnings: the config is valid, but something in
			// it is ignored or deprecated.
			if cfg.HyperConverged.Exists() {
				for _, w := range e.Warnings(cfg) {
					fmt.Fprintf(g.stderr, "warning: %s\n", w)
				}
			}
			fmt.Fprintf(g.stdout, "%s: valid\n", args[0])
			return nil
		},
	}
}

// load reads the config at path and validates it; with derive it also
// renders the graph for the facts of --facts.
func (g *globals) load(ctx context.Context, path string, derive bool) (*graph.Rendered, error) {
	e, err := g.engineFor()
	if err != nil {
		return nil, err
	}
	cfg, err := e.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if !derive {
		return nil, e.VetContext(ctx, cfg)
	}
	var f map[string]any // none: the schema's defaults
	if g.facts != "" {
		if f, err = e.FactsFile(g.facts); err != nil {
			return nil, err
		}
	}
	return e.RenderContext(ctx, cfg, graph.Inputs{Facts: f})
}
