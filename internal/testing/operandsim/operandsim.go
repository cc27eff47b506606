// Package operandsim plays the operators converge deploys (virt-operator,
// cdi-operator, …), which never run on the bare API servers of the tests:
// it marks every operand CR that has no conditions yet
// Available=True, Progressing=False, Degraded=False, so the health gates
// open as they would in a real cluster. Test support only.
package operandsim

import (
	"context"
	"encoding/json"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OperandKinds are the kinds whose health rule in components/graph.cue is
// "conditions": an operator would report Available on them.
var OperandKinds = map[string]bool{"KubeVirt": true, "CDI": true, "NetworkAddonsConfig": true, "SSP": true,
	"HostPathProvisioner": true, "AAQ": true, "MigController": true, "FileRestoreOperator": true}

// Run marks the operand CRs every 200ms until ctx ends. c needs
// apiextensions/v1 in its scheme (to list CRDs). Errors are ignored: the
// next round retries.
func Run(ctx context.Context, c client.Client) {
	for ctx.Err() == nil {
		crds := &apiextensionsv1.CustomResourceDefinitionList{}
		if err := c.List(ctx, crds); err == nil {
			for _, crd := range crds.Items {
				if !OperandKinds[crd.Spec.Names.Kind] {
					continue
				}
				for _, v := range crd.Spec.Versions {
					if v.Storage {
						MarkAvailable(ctx, c, crd.Spec.Group+"/"+v.Name, crd.Spec.Names.Kind,
							v.Subresources != nil && v.Subresources.Status != nil)
					}
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// MarkAvailable marks every object of apiVersion/kind without conditions
// Available=True, Progressing=False, Degraded=False, through the status
// subresource when the CRD has one.
func MarkAvailable(ctx context.Context, c client.Client, apiVersion, kind string, subresource bool) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(apiVersion)
	list.SetKind(kind + "List")
	if err := c.List(ctx, list); err != nil {
		return
	}
	now := time.Now().UTC().Format(time.RFC3339)
	cond := func(t, s string) map[string]any {
		return map[string]any{"type": t, "status": s, "reason": "Test", "message": "test operator", "lastTransitionTime": now}
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{
		cond("Available", "True"), cond("Progressing", "False"), cond("Degraded", "False")}}})
	for i := range list.Items {
		u := &list.Items[i]
		if conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); len(conds) > 0 {
			continue
		}
		if subresource {
			_ = c.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, patch))
		} else {
			_ = c.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch))
		}
	}
}
