package crdtest

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TemplateCRDName is the name of the CRD InstallTemplateAPI creates.
const TemplateCRDName = "templates.template.openshift.io"

// InstallTemplateAPI takes a test and a client (any scheme: the CRD is
// applied as unstructured) and installs a namespaced CRD
// templates.template.openshift.io, v1, kind Template, that keeps every
// field (objects and parameters sit at a Template's root). It stands in
// for OpenShift's Template API, which openshift-apiserver serves as an
// aggregated API and no CRD defines: SSP's operator and template
// validator see it through discovery and the REST mapper either way. It
// waits as Apply does and fails the test when the CRD is refused or not
// served in time.
func InstallTemplateAPI(t testing.TB, c client.Client) {
	t.Helper()
	Apply(t, c, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": TemplateCRDName},
		"spec": map[string]any{
			"group": "template.openshift.io", "scope": "Namespaced",
			"names": map[string]any{"plural": "templates", "singular": "template", "kind": "Template", "listKind": "TemplateList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}})
}
