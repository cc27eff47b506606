package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/fluxcd/pkg/ssa"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/graph/facts"
	"github.com/converge-dev/converge/reconciler"
)

func newApply(g *globals) *cobra.Command {
	var revision string
	var prune bool
	cmd := &cobra.Command{
		Use:   "apply PATH",
		Short: "Apply a config once to the cluster of the current kubeconfig",
		Long: `apply renders the config at PATH and drives it into the cluster once, as
converge-controller does on each reconcile: CRDs, then the components in
dependency order with server-side apply (field manager "converge"),
pruning of objects that left the config, the inventory, and the
HyperConverged's status. It prints the inventory (kind, namespace, name,
action) and the HC conditions. Cluster facts come from --facts FILE, else
from the cluster's nodes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, r, err := g.renderForCluster(ctx, args[0])
			if err != nil {
				return err
			}
			opts := reconciler.DefaultOptions()
			opts.Prune = prune
			// One shot: no later sync would apply what a health gate defers.
			opts.HealthGates = false
			res, err := reconciler.NewPipeline(c, nil, opts).Sync(ctx, reconciler.Input{Rendered: r, Revision: revision})
			if res != nil {
				PrintChangeSet(g.stdout, res.ChangeSet)
				fmt.Fprintln(g.stdout)
				PrintConditions(g.stdout, res.Conditions)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&g.facts, "facts", "", "cluster facts file (default: discovered from the cluster)")
	cmd.Flags().StringVar(&revision, "revision", "", "revision to record in the inventory and the HC status")
	cmd.Flags().BoolVar(&prune, "prune", true, "delete objects converge applied before that the config no longer holds")
	return cmd
}

// renderForCluster renders PATH with facts from --facts or the cluster.
func (g *globals) renderForCluster(ctx context.Context, path string) (client.Client, *graph.Rendered, error) {
	c, err := g.client()
	if err != nil {
		return nil, nil, err
	}
	if g.facts != "" {
		r, err := g.load(ctx, path, true)
		return c, r, err
	}
	e, err := g.engineFor()
	if err != nil {
		return nil, nil, err
	}
	f, err := facts.Discover(ctx, c, c.RESTMapper())
	if err != nil {
		return nil, nil, err
	}
	cfg, err := e.LoadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	r, err := e.RenderContext(ctx, cfg, graph.Inputs{Facts: f})
	return c, r, err
}

// PrintChangeSet writes cs as a table: KIND, NAMESPACE, NAME, ACTION.
func PrintChangeSet(w io.Writer, cs *ssa.ChangeSet) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tACTION")
	for _, e := range cs.Entries {
		ns := e.ObjMetadata.Namespace
		if ns == "" {
			ns = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.ObjMetadata.GroupKind.Kind, ns, e.ObjMetadata.Name, e.Action)
	}
	tw.Flush()
}

// PrintConditions writes conditions as a table: TYPE, STATUS, REASON, MESSAGE.
func PrintConditions(w io.Writer, conds []metav1.Condition) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range conds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	tw.Flush()
}
