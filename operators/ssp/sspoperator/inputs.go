package sspoperator

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/operators/operand"
)

// TemplateGVK is the common templates' kind, template.openshift.io/v1
// Template: OpenShift's aggregated Template API (openshift-apiserver),
// which plain Kubernetes does not serve.
var TemplateGVK = schema.GroupVersionKind{Group: "template.openshift.io", Version: "v1", Kind: "Template"}

// TemplateTypeLabel and TemplateTypeBase select the templates ssp-operator
// treats as common templates, older versions included (ssp-operator
// internal/operands/common-templates constants.go TemplateTypeLabel,
// TemplateTypeLabelBaseValue).
const (
	TemplateTypeLabel = "template.kubevirt.io/type"
	TemplateTypeBase  = "base"
)

// Inputs gives the SSP roles' inputs (components/ssp #Roles inputs), read
// at every reconcile:
//
//   - templateAPI: whether d's API server serves templates in
//     TemplateGVK's group version (ssp-operator runs its common-templates
//     operand only on OpenShift, which serves it);
//   - templates, when it does: the Templates labelled TemplateTypeLabel
//     TemplateTypeBase in the CR's spec.commonTemplates.namespace, read
//     through api (uncached: a cache would start an informer for a kind
//     that may not be served), each as metadata.name, labels and
//     annotations and the Template's other fields (objects, parameters,
//     message, labels), so that the roles keep older versions deprecated
//     as ssp-operator does (deprecateOrDeleteOldTemplates);
//   - commonTemplates, when it does: graph.CommonTemplatesPackage, the
//     pinned bundle, which the engine builds only then.
//
// A discovery or list error fails the reconcile (retried with backoff).
// The API appearing later is seen at the SSP's next reconcile; on
// OpenShift it is served from the start.
func Inputs(d discovery.DiscoveryInterface, api client.Reader) *operand.Inputs {
	return &operand.Inputs{Read: func(ctx context.Context, _ client.Reader, cr *unstructured.Unstructured) (map[string]any, error) {
		served, err := templateAPIServed(d)
		if err != nil {
			return nil, err
		}
		if !served {
			return map[string]any{"templateAPI": false}, nil
		}
		ns, _, _ := unstructured.NestedString(cr.Object, "spec", "commonTemplates", "namespace")
		templates := []any{}
		if ns != "" {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(TemplateGVK.GroupVersion().WithKind("TemplateList"))
			if err := api.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{TemplateTypeLabel: TemplateTypeBase}); err != nil {
				return nil, fmt.Errorf("listing the base templates in %s: %w", ns, err)
			}
			for _, t := range list.Items {
				templates = append(templates, templateInput(t))
			}
		}
		return map[string]any{"templateAPI": true, "templates": templates, "commonTemplates": graph.CommonTemplatesPackage}, nil
	}}
}

// templateAPIServed tells whether d serves templates in TemplateGVK's
// group version.
func templateAPIServed(d discovery.DiscoveryInterface) (bool, error) {
	rl, err := d.ServerResourcesForGroupVersion(TemplateGVK.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", TemplateGVK.GroupVersion(), err)
	}
	for _, r := range rl.APIResources {
		if r.Name == "templates" {
			return true, nil
		}
	}
	return false, nil
}

// templateInput gives t as the roles take a found template: its name,
// labels and annotations, and its fields besides apiVersion, kind,
// metadata and status.
func templateInput(t unstructured.Unstructured) map[string]any {
	md := map[string]any{"name": t.GetName()}
	if l := t.GetLabels(); len(l) > 0 {
		md["labels"] = toAny(l)
	}
	if a := t.GetAnnotations(); len(a) > 0 {
		md["annotations"] = toAny(a)
	}
	out := map[string]any{"metadata": md}
	for k, v := range t.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
		default:
			out[k] = v
		}
	}
	return out
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
