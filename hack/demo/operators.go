package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/graph"
	"github.com/converge-dev/converge/internal/cli"
	"github.com/converge-dev/converge/internal/controlplane"
	"github.com/converge-dev/converge/reconciler"
)

// printComponents writes the component health as a table.
func printComponents(res *reconciler.Result) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tHEALTH\tMESSAGE")
	for _, c := range res.Components {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Health, c.Message)
	}
	tw.Flush()
}

// simulateOperators plays the operators' part, which no process does
// here: it writes Available=True, Degraded=False on every operand CR that
// exists (status subresource, field manager "demo-simulated-operator"),
// then waits for the syncs the status changes trigger, until no
// component waits any more and every operand is marked. It returns the
// last result.
func simulateOperators(ctx context.Context, env *controlplane.Env, rendered <-chan *graph.Rendered, results <-chan *reconciler.Result) (*reconciler.Result, error) {
	var r *graph.Rendered
	select {
	case r = <-rendered:
	default:
		return nil, fmt.Errorf("no render seen")
	}
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		return nil, err
	}
	marked := map[string]bool{}
	applied := ssa.NewChangeSet()
	deadline := time.After(3 * time.Minute)
	var last *reconciler.Result
	for round := 1; ; round++ {
		n := 0
		for _, o := range r.Objects() {
			key := o.GetKind() + "/" + o.GetName()
			if r.HealthRule(o.GetKind()) != "conditions" || marked[key] {
				continue
			}
			ok, err := markAvailable(ctx, c, o)
			if err != nil {
				return nil, err
			}
			if ok {
				if n == 0 {
					say("SIMULATING THE OPERATORS (none runs in this demo), round %d: writing Available on the operand CRs that exist", round)
				}
				marked[key] = true
				fmt.Printf("  %s %s: Available=True, Degraded=False\n", o.GetKind(), o.GetName())
				n++
			}
		}
		if n == 0 && last != nil && !last.Waiting {
			fmt.Println("\nobjects the health gates had held back, applied once their dependencies were Available:")
			fmt.Println()
			cli.PrintChangeSet(os.Stdout, applied)
			fmt.Println()
			printComponents(last)
			fmt.Println()
			cli.PrintConditions(os.Stdout, last.Conditions)
			return last, nil
		}
		// The status writes bump the CRs' resourceVersions; the metadata
		// watches trigger syncs. Take results until one judged every
		// marked operand healthy.
		for res := (*reconciler.Result)(nil); res == nil || !sawMarked(res, r, marked); {
			select {
			case res = <-results:
				for _, e := range res.ChangeSet.Entries {
					if e.Action == ssa.CreatedAction {
						applied.Add(e)
					}
				}
				last = res
			case <-deadline:
				return nil, fmt.Errorf("components still waiting after 3 minutes")
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		fmt.Printf("\nsync after round %d (%d write requests):\n\n", round, last.Writes)
		printComponents(last)
	}
}

// sawMarked reports whether res judged every marked operand healthy.
func sawMarked(res *reconciler.Result, r *graph.Rendered, marked map[string]bool) bool {
	healthy := map[string]bool{}
	for _, c := range res.Components {
		healthy[c.Name] = c.Health == reconciler.Healthy
	}
	for _, n := range r.Nodes {
		for _, o := range n.Objects {
			if marked[o.GetKind()+"/"+o.GetName()] && !healthy[n.Name] {
				return false
			}
		}
	}
	return true
}

// markAvailable writes the conditions an operator reports when ready; it
// reports false when the CR does not exist (yet).
func markAvailable(ctx context.Context, c client.Client, o *unstructured.Unstructured) (bool, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(o.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	now := time.Now().UTC().Format(time.RFC3339)
	cond := func(t, s string) any {
		return map[string]any{"type": t, "status": s, "reason": "SimulatedByDemo", "message": "set by the demo, not an operator", "lastTransitionTime": now}
	}
	_ = unstructured.SetNestedSlice(cur.Object, []any{cond("Available", "True"), cond("Progressing", "False"), cond("Degraded", "False")}, "status", "conditions")
	if err := c.Status().Update(ctx, cur, client.FieldOwner("demo-simulated-operator")); err != nil {
		return false, fmt.Errorf("%s %s: writing status: %w", o.GetKind(), o.GetName(), err)
	}
	return true, nil
}
