package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/operators/hco/hcstatus"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// hcGVK is the HyperConverged's GroupVersionKind.
var hcGVK = schema.GroupVersionKind{Group: "hco.kubevirt.io", Version: "v1", Kind: "HyperConverged"}

// writeStatus computes the HC status (conditions aggregated from the
// operand CRs whose health rule is "conditions", observedGeneration,
// relatedObjects, revision, systemHealthStatus) and writes it with SSA on
// the status subresource when it differs from what the HC has. With r nil
// (failed fetch or render) only the conditions change. It records the
// HC's resulting resourceVersion in inv so the status write itself is not
// taken for drift.
//
// known holds operands already read this sync (by inventory ID); the
// others are read now.
func (p *Pipeline) writeStatus(ctx context.Context, key types.NamespacedName, r *graph.Rendered, inv *v1alpha1.Inventory, known map[string]hcstatus.Operand, syncErr error, res *Result) (bool, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(hcGVK)
	if err := p.Reader.Get(ctx, key, cur); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return false, nil // nothing to report on yet
		}
		return false, fmt.Errorf("reading HyperConverged %s: %w", key, err)
	}
	status, _, _ := unstructured.NestedMap(cur.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	desired := runtime.DeepCopyJSON(status)
	var conds []metav1.Condition
	if raw, ok := desired["conditions"]; ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &conds)
	}
	in := hcstatus.Input{ReconcileError: syncErr, Generation: cur.GetGeneration()}
	if r != nil {
		ops, err := p.readOperands(ctx, r, known)
		if err != nil {
			return false, err
		}
		in.Operands, in.Tainted = ops, r.Tainted
		desired["observedGeneration"] = cur.GetGeneration()
		desired["relatedObjects"] = relatedObjects(r)
		if res.Revision != "" {
			desired["revision"] = res.Revision
		}
		desired["versions"] = []any{map[string]any{"name": "operator", "version": r.Version}}
	}
	agg := hcstatus.Aggregate(in)
	if r == nil {
		agg = agg[:1] // ReconcileComplete only
	}
	hcstatus.Merge(&conds, agg, metav1.NewTime(time.Now().Truncate(time.Second)))
	res.Conditions = conds
	desired["conditions"] = toJSON(conds)
	desired["systemHealthStatus"] = hcstatus.SystemHealth(conds)
	if reflect.DeepEqual(toJSON(desired), toJSON(status)) {
		return false, nil
	}
	patch := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": cur.GetAPIVersion(), "kind": cur.GetKind(),
		"metadata": map[string]any{"name": key.Name, "namespace": key.Namespace},
		"status":   desired,
	}}
	if err := p.Client.Status().Patch(ctx, patch, client.Apply, client.FieldOwner(p.Options.fieldManager()), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("writing HyperConverged %s status: %w", key, err)
	}
	res.Writes++
	id := inventory.IDOf(key.Namespace, key.Name, hcGVK.GroupKind())
	if p.Options.Wrote != nil {
		p.Options.Wrote(id, patch.GetResourceVersion())
	}
	if inv != nil {
		for i, e := range inv.Entries {
			if e.ID == id {
				inv.Entries[i].ResourceVersion = patch.GetResourceVersion()
			}
		}
	}
	return true, nil
}

// readOperands returns the conditions of every object of r whose health
// rule is "conditions", in graph order: from known when read already this
// sync, else read now.
func (p *Pipeline) readOperands(ctx context.Context, r *graph.Rendered, known map[string]hcstatus.Operand) ([]hcstatus.Operand, error) {
	var ops []hcstatus.Operand
	for _, n := range r.Nodes {
		for _, o := range n.Objects {
			if r.HealthRule(o.GetKind()) != "conditions" {
				continue
			}
			op, ok := known[inventory.ID(o)]
			if !ok {
				var err error
				if op, err = p.readOperand(ctx, o); err != nil {
					return nil, err
				}
			}
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// relatedObjects lists every applied object as an ObjectReference, as HCO
// status.relatedObjects.
func relatedObjects(r *graph.Rendered) []any {
	var out []any
	for _, o := range r.Objects() {
		ref := map[string]any{"apiVersion": o.GetAPIVersion(), "kind": o.GetKind(), "name": o.GetName()}
		if o.GetNamespace() != "" {
			ref["namespace"] = o.GetNamespace()
		}
		out = append(out, ref)
	}
	return out
}

func toJSON(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
