package hcowebhook_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/hco/hcowebhook"
)

// TestConversionThroughAPIServer installs the HyperConverged CRD as the
// engine generates it with a conversion webhook (v1 stored, v1beta1 also
// served), serves Converter and Validator on 127.0.0.1 with a managed
// certificate whose CA is injected into the CRD and the webhook
// configuration, and checks what kubectl users of either version see: a
// v1beta1 object is stored as v1 with HCO's field moves, reads back in
// v1beta1 unchanged, a v1 object with v1-only fields survives being read
// and updated through v1beta1, and a bad v1beta1 object is refused by the
// v1beta1 webhook with converge vet's message.
func TestConversionThroughAPIServer(t *testing.T) {
	c := controlplane.StartForTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-hyperconverged"}}); err != nil {
		t.Fatal(err)
	}
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	w := hcowebhook.Webhook(e, func(context.Context) (map[string]any, error) {
		return map[string]any{"platform": "kubernetes", "workerNodes": 2}, nil
	})
	certs := webhooktest.Start(t, c, webhook.Options{
		Secret:  types.NamespacedName{Namespace: "kubevirt-hyperconverged", Name: "converge-webhook-cert"},
		Hosts:   []string{"127.0.0.1"},
		Targets: w.Targets(), // the configuration and the CRD's conversion webhook
	})
	ep := webhooktest.Serve(t, ctx, certs, w)

	// The CRD converts through the served /convert, as converge-controller
	// enables it.
	e.EnableConversion(ep.ClientConfig(hcowebhook.ConvertPath))
	crds, err := e.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	var crd *unstructured.Unstructured
	for _, x := range crds {
		if x.Name == "hyperconvergeds" {
			crd = x.Object
		}
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd), client.FieldOwner("converge-test")); err != nil {
		t.Fatal(err)
	}
	certs.Trigger() // inject the CA into the new CRD now
	if err := w.Apply(ctx, c, ep, certs.CABundle(), "converge-test"); err != nil {
		t.Fatal(err)
	}
	waitForWebhook(t, ctx, c, "v1beta1")

	// A v1beta1 object is stored as v1, converted as HCO does.
	beta := object(t, `
apiVersion: hco.kubevirt.io/v1beta1
kind: HyperConverged
metadata:
  name: kubevirt-hyperconverged
  namespace: kubevirt-hyperconverged
  # AAQ has no native operator: it needs external mode.
  annotations: {converge.dev/operators: external}
spec:
  featureGates: {downwardMetrics: true}
  infra: {nodePlacement: {nodeSelector: {infra: "true"}}}
  enableApplicationAwareQuota: true
`)
	if err := c.Create(ctx, beta); err != nil {
		t.Fatalf("creating a v1beta1 HyperConverged: %v", err)
	}
	asV1 := get(t, ctx, c, "v1", "kubevirt-hyperconverged")
	for _, chk := range []struct {
		path []string
		want any
	}{
		{[]string{"spec", "deployment", "nodePlacements", "infra", "nodeSelector", "infra"}, "true"},
		{[]string{"spec", "deployment", "applicationAwareConfig", "enable"}, true},
		{[]string{"spec", "deployment", "deployNetworkResourcesInjector"}, true},
	} {
		got, _, _ := unstructured.NestedFieldNoCopy(asV1.Object, chk.path...)
		if got != chk.want {
			t.Errorf("v1 view %s = %v, want %v", strings.Join(chk.path, "."), got, chk.want)
		}
	}
	gates, _, _ := unstructured.NestedSlice(asV1.Object, "spec", "featureGates")
	if len(gates) != 1 || gates[0].(map[string]any)["name"] != "downwardMetrics" {
		t.Errorf("v1 view featureGates = %v, want [downwardMetrics]", gates)
	}
	asBeta := get(t, ctx, c, "v1beta1", "kubevirt-hyperconverged")
	if v, _, _ := unstructured.NestedBool(asBeta.Object, "spec", "featureGates", "downwardMetrics"); !v {
		t.Errorf("v1beta1 view lost featureGates.downwardMetrics: %v", asBeta.Object["spec"])
	}
	if v, _, _ := unstructured.NestedString(asBeta.Object, "spec", "infra", "nodePlacement", "nodeSelector", "infra"); v != "true" {
		t.Errorf("v1beta1 view lost infra.nodePlacement: %v", asBeta.Object["spec"])
	}

	// v1-only fields survive an update made through v1beta1.
	v1obj := object(t, `
apiVersion: hco.kubevirt.io/v1
kind: HyperConverged
metadata: {name: second-kubevirt-hyperconverged, namespace: kubevirt-hyperconverged}
spec:
  featureGates: [{name: template, state: Disabled}]
  deployment: {deployNetworkResourcesInjector: false}
  observability: {allowedAlerts: [none]}
`)
	if err := c.Create(ctx, v1obj); err != nil {
		t.Fatalf("creating a v1 HyperConverged: %v", err)
	}
	viaBeta := get(t, ctx, c, "v1beta1", "second-kubevirt-hyperconverged")
	viaBeta.SetLabels(map[string]string{"edited": "through-v1beta1"})
	if err := c.Update(ctx, viaBeta); err != nil {
		t.Fatalf("updating through v1beta1: %v", err)
	}
	back := get(t, ctx, c, "v1", "second-kubevirt-hyperconverged")
	if back.GetLabels()["edited"] != "through-v1beta1" {
		t.Errorf("the v1beta1 update is lost: labels %v", back.GetLabels())
	}
	if v, found, _ := unstructured.NestedBool(back.Object, "spec", "deployment", "deployNetworkResourcesInjector"); !found || v {
		t.Errorf("deployNetworkResourcesInjector after a v1beta1 round trip = %v (found %v), want false", v, found)
	}
	if a, _, _ := unstructured.NestedStringSlice(back.Object, "spec", "observability", "allowedAlerts"); len(a) != 1 || a[0] != "none" {
		t.Errorf("observability.allowedAlerts after a v1beta1 round trip = %v, want [none]", a)
	}
	if g, _, _ := unstructured.NestedSlice(back.Object, "spec", "featureGates"); len(g) != 1 || g[0].(map[string]any)["state"] != "Disabled" {
		t.Errorf("featureGates after a v1beta1 round trip = %v, want [template Disabled]", g)
	}
	if _, ok := back.GetAnnotations()[graph.V1OnlyFieldsAnnotation]; ok {
		t.Errorf("the v1 view carries the %s annotation", graph.V1OnlyFieldsAnnotation)
	}

	// Every valid example of the schema tests, of either version, that
	// converge renders is admitted by the webhook and stored by the API
	// server (the generated CRD schema and the conversion accept what the
	// CUE schema accepts).
	examples, _ := filepath.Glob(filepath.Join("..", "..", "..", "schema", "testdata", "hyperconverged", "*.yaml"))
	v1examples, _ := filepath.Glob(filepath.Join("..", "..", "..", "schema", "testdata", "hyperconverged-v1", "*.yaml"))
	examples = append(examples, v1examples...)
	if len(examples) < 4 {
		t.Fatalf("found %d valid examples, want the schema tests' v1beta1 and v1 examples", len(examples))
	}
	for i, f := range examples {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ex := object(t, string(b))
		ex.SetName(fmt.Sprintf("ex%d-kubevirt-hyperconverged", i))
		ex.SetNamespace("kubevirt-hyperconverged")
		ex.SetResourceVersion("")
		ex.SetUID("")
		ex.SetCreationTimestamp(metav1.Time{})
		ex.SetGeneration(0)
		ex.SetManagedFields(nil)
		// The webhook also runs the derivation (as HCO's does), so an
		// example whose render fails (full.yaml's jsonpatch moves a key the
		// KubeVirt spec lacks) must be refused with the render error.
		cfg, err := e.LoadConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		_, renderErr := e.Render(cfg, map[string]any{"platform": "kubernetes", "workerNodes": 2})
		err = c.Create(ctx, ex)
		switch {
		case renderErr == nil && err != nil:
			t.Errorf("valid example %s refused: %v", f, err)
		case renderErr != nil && err == nil:
			t.Errorf("example %s admitted, but converge render fails on it: %v", f, renderErr)
		case renderErr != nil:
			last := strings.Split(renderErr.Error(), ": ")
			if !strings.Contains(err.Error(), last[len(last)-1]) {
				t.Errorf("example %s refused with %v, want the render error %v", f, err, renderErr)
			}
		}
	}

	// A bad v1beta1 object is refused with the vet message.
	err = c.Create(ctx, object(t, badCA["v1beta1"]))
	assertDenied(t, err, hcowebhook.V1Beta1WebhookName, hcName+": "+badCALine["v1beta1"], cliLines(t, e, badCA["v1beta1"], false))
}

func get(t *testing.T, ctx context.Context, c client.Client, version, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("hco.kubevirt.io/" + version)
	u.SetKind("HyperConverged")
	if err := c.Get(ctx, client.ObjectKey{Namespace: "kubevirt-hyperconverged", Name: name}, u); err != nil {
		t.Fatalf("reading %s as %s: %v", name, version, err)
	}
	return u
}
