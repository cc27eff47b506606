package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// waitInterval is how often a reconcile wait reads the Sync.
const waitInterval = 500 * time.Millisecond

// kindCommand is a verb's parent command (reconcile, suspend, resume):
// the kind comes as a subcommand, as in flux's `reconcile kustomization`.
func kindCommand(use, short string, sync *cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use + " sync NAME",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fmt.Errorf("%s: name a kind and a Sync: converge %s sync NAME", use, use)
		},
	}
	cmd.AddCommand(sync)
	return cmd
}

func newReconcile(g *globals) *cobra.Command {
	var ns string
	var timeout time.Duration
	var withSource bool
	sync := &cobra.Command{
		Use:     "sync NAME",
		Aliases: []string{"syncs"},
		Short:   "Reconcile a Sync now and wait for the result",
		Long: `reconcile sync NAME asks converge-controller to reconcile the Sync NAME (in
-n, default converge-system) now: it sets the annotation
converge.dev/reconcile-requested-at to the current time (RFC 3339,
nanoseconds), waits until the controller reports it handled that request
(status.lastHandledReconcileAt) with a Ready condition of True or False,
and prints the Ready condition and the applied revision, as "flux
reconcile kustomization" does. It exits 1 with the Ready message when the
reconcile failed, when the Sync is suspended, or after --timeout.
--with-source is accepted for flux's muscle memory and changes nothing:
a Sync's source and apply are one object, so every reconcile fetches.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_ = withSource
			ctx := cmd.Context()
			c, s, err := g.clientAndSync(ctx, ns, args[0])
			if err != nil {
				return err
			}
			if s.Spec.Suspend {
				return fmt.Errorf("Sync %s/%s is suspended: resume it with converge resume sync %s -n %s", ns, s.Name, s.Name, ns)
			}
			return g.requestAndWait(ctx, c, s, nil, timeout)
		},
	}
	namespaceFlags(sync, &ns, nil)
	sync.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the controller to reconcile")
	sync.Flags().BoolVar(&withSource, "with-source", false, "fetch the source first (always done: accepted as in flux)")
	return kindCommand("reconcile", "Reconcile a Sync now and wait for the result", sync)
}

func newSuspend(g *globals) *cobra.Command {
	var ns string
	sync := &cobra.Command{
		Use:     "sync NAME",
		Aliases: []string{"syncs"},
		Short:   "Suspend a Sync: stop reconciling it and correcting drift",
		Long: `suspend sync NAME sets spec.suspend of the Sync NAME (in -n, default
converge-system) to true with a merge patch (field manager converge-cli):
converge-controller stops reconciling it, and correcting drift, until
"converge resume sync NAME".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, s, err := g.clientAndSync(ctx, ns, args[0])
			if err != nil {
				return err
			}
			if err := patchSync(ctx, c, s, map[string]any{"spec": map[string]any{"suspend": true}}); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "Sync %s/%s suspended\n", ns, s.Name)
			return nil
		},
	}
	namespaceFlags(sync, &ns, nil)
	return kindCommand("suspend", "Suspend a Sync", sync)
}

func newResume(g *globals) *cobra.Command {
	var ns string
	var timeout time.Duration
	sync := &cobra.Command{
		Use:     "sync NAME",
		Aliases: []string{"syncs"},
		Short:   "Resume a suspended Sync and wait for its reconcile",
		Long: `resume sync NAME sets spec.suspend of the Sync NAME (in -n, default
converge-system) to false and, in the same merge patch (field manager
converge-cli), requests a reconcile, then waits for it as "converge
reconcile sync" does (as "flux resume"): exit 1 when it failed or after
--timeout.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, s, err := g.clientAndSync(ctx, ns, args[0])
			if err != nil {
				return err
			}
			return g.requestAndWait(ctx, c, s, map[string]any{"suspend": false}, timeout)
		},
	}
	namespaceFlags(sync, &ns, nil)
	sync.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the controller to reconcile")
	return kindCommand("resume", "Resume a suspended Sync", sync)
}

// patchSync merge-patches s with patch as converge-cli.
func patchSync(ctx context.Context, c client.Client, s *v1alpha1.Sync, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, s, client.RawPatch(types.MergePatchType, b), client.FieldOwner(CLIFieldManager)); err != nil {
		return syncError(s.Namespace, s.Name, err)
	}
	return nil
}

// requestAndWait sets the reconcile request annotation on s (and spec,
// when given, in the same patch), then waits until the controller handled
// that request with a decided Ready condition, for at most timeout. It
// prints the outcome; a Ready=False outcome is an error with its message.
func (g *globals) requestAndWait(ctx context.Context, c client.Client, s *v1alpha1.Sync, spec map[string]any, timeout time.Duration) error {
	at := time.Now().UTC().Format(time.RFC3339Nano)
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.ReconcileRequestAnnotation: at}}}
	if spec != nil {
		patch["spec"] = spec
	}
	if err := patchSync(ctx, c, s, patch); err != nil {
		return err
	}
	id := s.Namespace + "/" + s.Name
	if spec != nil {
		fmt.Fprintf(g.stderr, "Sync %s resumed\n", id)
	}
	fmt.Fprintf(g.stderr, "requested a reconcile of Sync %s (%s=%s); waiting for it\n", id, v1alpha1.ReconcileRequestAnnotation, at)
	var last *v1alpha1.Sync
	// Each read uses ctx, not the poll's deadline context: a read started
	// just before the deadline finishes (or fails on its own).
	err := wait.PollUntilContextTimeout(ctx, waitInterval, timeout, true, func(context.Context) (bool, error) {
		cur, err := getSync(ctx, c, s.Namespace, s.Name)
		if err != nil {
			return false, err
		}
		last = cur
		return reconciled(cur, at), nil
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err) {
			msg := "the controller did not handle it"
			if last != nil && last.Status.LastHandledReconcileAt == at {
				r := readyCondition(last)
				msg = fmt.Sprintf("the controller handled it but Ready is still %s: %s", r.Status, oneLine(r.Message))
			}
			return fmt.Errorf("Sync %s: no reconcile result for the request %s within %s: %s (is converge-controller running?)", id, at, timeout, msg)
		}
		return err
	}
	ready := readyCondition(last)
	if ready.Status != metav1.ConditionTrue {
		return fmt.Errorf("Sync %s reconcile failed: %s: %s", id, ready.Reason, oneLine(ready.Message))
	}
	fmt.Fprintf(g.stdout, "Sync %s reconciled: revision %s\n", id, orDash(last.Status.LastAppliedRevision))
	fmt.Fprintf(g.stdout, "Ready=True %s: %s\n", ready.Reason, oneLine(ready.Message))
	return nil
}

// reconciled reports whether the controller handled the request at and
// decided Ready (True or False) for the Sync's current generation.
func reconciled(s *v1alpha1.Sync, at string) bool {
	if s.Status.LastHandledReconcileAt != at {
		return false
	}
	ready := readyCondition(s)
	if ready.Status == metav1.ConditionUnknown {
		return false
	}
	return ready.ObservedGeneration == 0 || ready.ObservedGeneration >= s.Generation
}
