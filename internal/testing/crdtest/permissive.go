package crdtest

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/crdwait"
)

// InstallPermissive takes a test, a client (whose scheme knows
// apiextensions/v1), a plural and a kind of group kubevirt.io and creates
// a namespaced kubevirt.io/v1 CRD for them that keeps every field
// (x-kubernetes-preserve-unknown-fields, a status subresource), standing
// in for the one the virt component installs where a test must store
// objects the graph's schema would refuse. It waits up to 30 s until the
// CRD is established and its kind served by c's REST mapper, and fails the
// test when it is refused or is not.
func InstallPermissive(t testing.TB, c client.Client, plural, kind string) {
	t.Helper()
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".kubevirt.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "kubevirt.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}}},
		},
	}
	ctx := context.Background()
	if err := c.Create(ctx, crd); err != nil {
		t.Fatalf("creating CRD %s: %v", crd.Name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !crdwait.Wait(wctx, c, 50*time.Millisecond, crd.Name) {
		t.Fatalf("CRD %s not established within 30s", crd.Name)
	}
	waitServed(wctx, t, c, schema.GroupKind{Group: crd.Spec.Group, Kind: kind})
}
