// Package crdwait holds back a controller until the CustomResourceDefinitions
// it watches are established. converge installs CRDs in the graph's "crds"
// stage, so they can appear after converge-controller starts; a watch on a
// kind the API server does not serve yet would fail the controller's start.
package crdwait

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// Established takes a reader (an API reader: a cache would start an
// informer on CRDs) and CRD names ("<plural>.<group>") and reports whether
// every one exists with condition Established=True. A read error counts
// as not established.
func Established(ctx context.Context, r client.Reader, names ...string) bool {
	for _, name := range names {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(crdGVK)
		if err := r.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		ok := false
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// Wait polls Established every poll until it holds (true) or ctx ends
// (false).
func Wait(ctx context.Context, r client.Reader, poll time.Duration, names ...string) bool {
	for !Established(ctx, r, names...) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(poll):
		}
	}
	return true
}
