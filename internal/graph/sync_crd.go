package graph

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph/crdgen"
)

// SyncCRD generates the CustomResourceDefinition syncs.converge.dev from the
// schema's #Sync, with kubectl printer columns for readiness, status
// message, applied revision, suspension and the receiver's webhook path. It is part of converge's own
// bundle (the controller's), not of the HyperConverged graph.
func (e *Engine) SyncCRD() (*unstructured.Unstructured, error) {
	defer e.Lock()()
	cond := func(t, f string) string { return `.status.conditions[?(@.type=="` + t + `")].` + f }
	crd, err := crdgen.Generate(e.def("#Sync"), crdgen.Names{
		Group: v1alpha1.Group, Version: v1alpha1.Version, Kind: v1alpha1.SyncKind,
		Plural: "syncs", Singular: "sync", Categories: []string{"converge"},
		Scope: apiextensionsv1.NamespaceScoped, StatusSubresource: true,
		PrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
			{Name: "Ready", Type: "string", JSONPath: cond("Ready", "status")},
			{Name: "Status", Type: "string", JSONPath: cond("Ready", "message")},
			{Name: "Revision", Type: "string", JSONPath: ".status.lastAppliedRevision", Priority: 1},
			{Name: "Suspended", Type: "boolean", JSONPath: ".spec.suspend"},
			{Name: "Webhook", Type: "string", JSONPath: ".status.webhookPath", Priority: 1},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("generating CRD syncs.converge.dev: %w", err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return nil, fmt.Errorf("generating CRD syncs.converge.dev: %w", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}
