package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

func newGet(g *globals) *cobra.Command {
	var ns string
	var all bool
	cmd := &cobra.Command{
		Use:   "get [syncs [NAME]]",
		Short: "List Syncs with their applied revision and readiness",
		Long: `get lists the Syncs of a namespace (-n, default converge-system; -A for
every namespace), or the one named, as "flux get kustomizations" does:
NAME, REVISION (status.lastAppliedRevision), SUSPENDED (spec.suspend),
READY and MESSAGE (the Ready condition). With none found it says so on
stderr and exits 0.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 2 {
				return fmt.Errorf("get takes at most a kind and a NAME, got %d arguments", len(args))
			}
			if len(args) == 2 && cmd.Flags().Changed("all-namespaces") {
				return fmt.Errorf("get: -A lists the Syncs of every namespace; name a Sync with -n instead")
			}
			if len(args) > 0 {
				return kindArg("get", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.client()
			if err != nil {
				return err
			}
			var syncs []v1alpha1.Sync
			if len(args) == 2 {
				s, err := getSync(ctx, c, ns, args[1])
				if err != nil {
					return err
				}
				syncs = []v1alpha1.Sync{*s}
			} else {
				list := &v1alpha1.SyncList{}
				var opts []client.ListOption
				if !all {
					opts = append(opts, client.InNamespace(ns))
				}
				if err := c.List(ctx, list, opts...); err != nil {
					if meta.IsNoMatchError(err) {
						return errNoSyncAPI
					}
					return fmt.Errorf("listing Syncs: %w", err)
				}
				syncs = list.Items
			}
			if len(syncs) == 0 {
				where := "in namespace " + ns
				if all {
					where = "in any namespace"
				}
				fmt.Fprintf(g.stderr, "no Syncs found %s\n", where)
				return nil
			}
			printSyncs(g.stdout, syncs, all)
			return nil
		},
	}
	namespaceFlags(cmd, &ns, &all)
	return cmd
}

// printSyncs writes syncs as a table sorted by namespace and name; with
// withNS the first column is NAMESPACE.
func printSyncs(w io.Writer, syncs []v1alpha1.Sync, withNS bool) {
	slices.SortFunc(syncs, func(a, b v1alpha1.Sync) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if withNS {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "NAME\tREVISION\tSUSPENDED\tREADY\tMESSAGE")
	for _, s := range syncs {
		if withNS {
			fmt.Fprintf(tw, "%s\t", s.Namespace)
		}
		ready := readyCondition(&s)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, orDash(s.Status.LastAppliedRevision),
			boolWord(s.Spec.Suspend), ready.Status, oneLine(ready.Message))
	}
	tw.Flush()
}

func boolWord(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table cell on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
