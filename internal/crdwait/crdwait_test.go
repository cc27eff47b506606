package crdwait_test

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/internal/crdwait"
	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// TestWait: against a real API server, Wait holds until the CRD is
// established, and gives false when its context ends first.
func TestWait(t *testing.T) {
	c := controlplane.StartForTest(t)
	ctx := context.Background()
	const name = "widgets.example.converge.dev"

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if crdwait.Wait(short, c, 50*time.Millisecond, name) {
		t.Fatal("Wait gave true for a CRD that does not exist")
	}
	if crdwait.Established(ctx, c, "namespaces", name) {
		t.Fatal("Established gave true for names that are not CRDs")
	}

	done := make(chan bool, 1)
	go func() { done <- crdwait.Wait(ctx, c, 50*time.Millisecond, name) }()
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.converge.dev",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("Wait gave false")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not see the CRD established")
	}
	if !crdwait.Established(ctx, c, name) {
		t.Fatal("Established gave false after Wait gave true")
	}
}
