package main

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// simulatedOperator is the field manager of the status writes that play
// the operators' part.
const simulatedOperator = "demo-simulated-operator"

// simulateOperators plays the operators converge deploys, which no
// process runs here (no kubelet, no images): every 200ms, until ctx ends,
// it writes Available=True, Progressing=False, Degraded=False on every
// operand CR of the controller's latest render (the objects whose health
// rule is "conditions") that exists and has no conditions yet, as an
// operator does once its operand is deployed. It prints one line per CR
// it marks, with the time since start.
func simulateOperators(ctx context.Context, c client.Client, ctl *controller) {
	start := time.Now()
	marked := map[string]bool{}
	for ctx.Err() == nil {
		if r := ctl.lastRendered(); r != nil {
			for _, o := range r.Objects() {
				key := subject(o)
				if r.HealthRule(o.GetKind()) != "conditions" || marked[key] {
					continue
				}
				ok, err := markAvailable(ctx, c, o)
				switch {
				case err != nil && ctx.Err() == nil:
					fmt.Printf("  [simulated operator] %s: %v\n", key, err)
				case ok:
					marked[key] = true
					fmt.Printf("  [simulated operator] +%4.1fs  %s: Available=True Degraded=False\n", time.Since(start).Seconds(), key)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// subject names o as "Kind/namespace/name" (or "Kind/name").
func subject(o client.Object) string {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	if o.GetNamespace() == "" {
		return kind + "/" + o.GetName()
	}
	return kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

// markAvailable writes the conditions an operator reports when its
// operand is ready on o's status subresource (field manager
// demo-simulated-operator); it reports false when o does not exist yet
// or already has conditions.
func markAvailable(ctx context.Context, c client.Client, o *unstructured.Unstructured) (bool, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(o.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return false, nil
		}
		return false, err
	}
	if conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions"); len(conds) > 0 {
		return false, nil
	}
	now := time.Now().UTC().Format(time.RFC3339)
	cond := func(t, s string) any {
		return map[string]any{"type": t, "status": s, "reason": "SimulatedByDemo", "message": "set by the demo, not an operator", "lastTransitionTime": now}
	}
	_ = unstructured.SetNestedSlice(cur.Object, []any{cond("Available", "True"), cond("Progressing", "False"), cond("Degraded", "False")}, "status", "conditions")
	if err := c.Status().Update(ctx, cur, client.FieldOwner(simulatedOperator)); err != nil {
		if apierrors.IsConflict(err) {
			return false, nil // changed meanwhile: the next round retries
		}
		return false, fmt.Errorf("writing status: %w", err)
	}
	return true, nil
}
