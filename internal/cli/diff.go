package cli

import (
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/reconciler"
)

func newDiff(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diff PATH",
		Short: "Show what an apply of a config would change in the cluster",
		Long: `diff renders the config at PATH and asks the API server for a server-side
apply dry run of every object (fluxcd/pkg/ssa Diff), printing a unified
diff of each object that would be created or changed. Exits 0 either way.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, r, err := g.renderForCluster(ctx, args[0])
			if err != nil {
				return err
			}
			p := reconciler.NewPipeline(c, nil, reconciler.DefaultOptions())
			owner := p.Manager.GetOwnerLabels(r.HyperConverged.GetName(), r.HyperConverged.GetNamespace())
			changed := 0
			for _, o := range r.Objects() {
				desired := o.DeepCopy()
				labels := desired.GetLabels()
				if labels == nil {
					labels = map[string]string{}
				}
				for k, v := range owner {
					labels[k] = v
				}
				desired.SetLabels(labels)
				entry, live, merged, err := p.Manager.Diff(ctx, desired, ssa.DefaultDiffOptions())
				if err != nil {
					return err
				}
				if entry.Action == ssa.UnchangedAction || entry.Action == ssa.SkippedAction {
					continue
				}
				changed++
				if err := printDiff(g, entry.Subject, live, merged); err != nil {
					return err
				}
			}
			if changed == 0 {
				fmt.Fprintln(g.stdout, "no changes")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&g.facts, "facts", "", "cluster facts file (default: discovered from the cluster)")
	return cmd
}

func printDiff(g *globals, subject string, live, merged *unstructured.Unstructured) error {
	text := func(u *unstructured.Unstructured) string {
		if u == nil {
			return ""
		}
		c := u.DeepCopy()
		unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
		unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(c.Object, "metadata", "generation")
		unstructured.RemoveNestedField(c.Object, "metadata", "uid")
		unstructured.RemoveNestedField(c.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(c.Object, "status")
		b, _ := yaml.Marshal(c.Object)
		return string(b)
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(text(live)), B: difflib.SplitLines(text(merged)),
		FromFile: "live/" + subject, ToFile: "desired/" + subject, Context: 3,
	})
	if err != nil {
		return err
	}
	fmt.Fprint(g.stdout, d)
	return nil
}
