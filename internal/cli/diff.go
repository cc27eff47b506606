package cli

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/reconciler"
)

func newDiff(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diff PATH",
		Short: "Show what an apply of a config would change in the cluster",
		Long: `diff renders the config at PATH and asks the API server for a server-side
apply dry run of every object (fluxcd/pkg/ssa Diff), printing a unified
diff of each object that would be created or changed; an object whose CRD
this render would install first is shown as created. As kubectl diff, it
exits 0 when nothing would change, 1 when something would, and 2 on an
error (invalid config, unreachable cluster).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			changed, err := runDiff(cmd.Context(), g, args[0])
			switch {
			case err != nil:
				return &exitCodeError{code: 2, err: err}
			case changed > 0:
				return &exitCodeError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&g.facts, "facts", "", "cluster facts file (default: discovered from the cluster)")
	return cmd
}

// runDiff prints the diff of the config at path against the cluster and
// returns how many objects would change.
func runDiff(ctx context.Context, g *globals, path string) (int, error) {
	c, r, err := g.renderForCluster(ctx, path)
	if err != nil {
		return 0, err
	}
	p := reconciler.NewPipeline(c, nil, reconciler.DefaultOptions())
	// The HC's uid, if it exists, for the ownerReferences apply sets.
	hc := r.HyperConverged.DeepCopy()
	if err := c.Get(ctx, client.ObjectKeyFromObject(hc), hc); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		return 0, err
	}
	changed := 0
	for _, o := range r.Objects() {
		desired := p.Desired(r, o, string(hc.GetUID()))
		entry, live, merged, err := p.Manager.Diff(ctx, desired, ssa.DefaultDiffOptions())
		switch {
		case meta.IsNoMatchError(err):
			// Its CRD is in this render but not served yet: a creation.
			live, merged = nil, desired
		case err != nil:
			return changed, err
		case entry.Action == ssa.UnchangedAction || entry.Action == ssa.SkippedAction:
			continue
		case entry.Action == ssa.CreatedAction:
			merged = desired
		}
		changed++
		if err := printDiff(g, subject(desired), live, merged); err != nil {
			return changed, err
		}
	}
	if changed == 0 {
		fmt.Fprintln(g.stdout, "no changes")
	}
	return changed, nil
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

// subject names u as KIND/NAMESPACE/NAME (KIND/NAME when cluster-scoped).
func subject(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
	}
	return u.GetKind() + "/" + u.GetName()
}
