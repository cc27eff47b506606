package hcowebhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/hco/hcowebhook"
)

// TestWebhookThroughAPIServer serves the Validator with a managed
// certificate on 127.0.0.1, registers the ValidatingWebhookConfiguration
// with a URL and the injected CA bundle on a real API server that has the
// HyperConverged CRD, and checks what kubectl users see: invalid objects
// are refused with the CLI's path and message, valid ones are stored, an
// update that breaks a stored object is refused, and a label change on an
// invalid object stored before the webhook existed is let through (HCO's
// unchanged-spec rule). It runs for every version the CRD serves.
func TestWebhookThroughAPIServer(t *testing.T) {
	e := sharedEngine(t)
	c := controlplane.StartForTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	versions := installHCCRD(t, c, e)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-hyperconverged"}}); err != nil {
		t.Fatal(err)
	}
	// Stored before the webhook exists.
	for _, v := range versions {
		old := object(t, badCA[v])
		old.SetName("old-" + v + "-kubevirt-hyperconverged")
		if err := c.Create(ctx, old); err != nil {
			t.Fatalf("creating an invalid %s HyperConverged without the webhook: %v", v, err)
		}
	}

	w := hcowebhook.Webhook(e, func(context.Context) (map[string]any, error) {
		return map[string]any{"platform": "kubernetes", "workerNodes": 2}, nil
	})
	certs := webhooktest.Start(t, c, webhook.Options{
		Secret:  types.NamespacedName{Namespace: "kubevirt-hyperconverged", Name: "converge-webhook-cert"},
		Hosts:   []string{"127.0.0.1"},
		Targets: w.Targets(),
	})
	ep := webhooktest.Serve(t, ctx, certs, w)
	if err := w.Apply(ctx, c, ep, certs.CABundle(), "converge-test"); err != nil {
		t.Fatal(err)
	}
	waitForWebhook(t, ctx, c, versions[0])

	for _, v := range versions {
		webhookName := map[string]string{"v1": hcowebhook.V1WebhookName, "v1beta1": hcowebhook.V1Beta1WebhookName}[v]
		t.Run(v, func(t *testing.T) {
			for _, bad := range []struct{ name, obj, want string }{
				{"certConfig.ca.duration 5m", badCA[v], badCALine[v]},
				{"jsonpatch outside /spec/", badPatch[v], "metadata.annotations"},
			} {
				err := c.Create(ctx, object(t, bad.obj))
				assertDenied(t, err, webhookName, hcName+": "+bad.want, cliLines(t, e, bad.obj, false))
			}

			good := object(t, goodSpec[v])
			if err := c.Create(ctx, good); err != nil {
				t.Fatalf("a valid HyperConverged was refused: %v", err)
			}
			broken := object(t, badCA[v])
			broken.SetResourceVersion(good.GetResourceVersion())
			err := c.Update(ctx, broken)
			assertDenied(t, err, webhookName, hcName+": "+badCALine[v], cliLines(t, e, badCA[v], false))
			if err := c.Delete(ctx, good); err != nil {
				t.Fatal(err)
			}

			old := &unstructured.Unstructured{}
			old.SetAPIVersion("hco.kubevirt.io/" + v)
			old.SetKind("HyperConverged")
			key := client.ObjectKey{Namespace: "kubevirt-hyperconverged", Name: "old-" + v + "-kubevirt-hyperconverged"}
			if err := c.Get(ctx, key, old); err != nil {
				t.Fatal(err)
			}
			old.SetLabels(map[string]string{"touched": "true"})
			if err := c.Update(ctx, old); err != nil {
				t.Errorf("a label change on a stored object was refused: %v", err)
			}
			if err := unstructured.SetNestedField(old.Object, "1m", specPath(v, "certConfig", "server", "duration")...); err != nil {
				t.Fatal(err)
			}
			if err := c.Update(ctx, old); err == nil {
				t.Error("a spec change on an invalid stored object was admitted")
			}
		})
	}
}

var (
	goodSpec  = map[string]string{"v1": goodV1, "v1beta1": goodV1Beta1}
	badCA     = map[string]string{"v1": badCAV1, "v1beta1": badCAV1Beta1}
	badPatch  = map[string]string{"v1": badPatchV1, "v1beta1": strings.Replace(badPatchV1, "hco.kubevirt.io/v1\n", "hco.kubevirt.io/v1beta1\n", 1)}
	badCALine = map[string]string{
		"v1":      "spec.security.certConfig.ca: duration (5m) must be at least 10m",
		"v1beta1": "spec.certConfig.ca: duration (5m) must be at least 10m",
	}
)

// specPath gives the path of a certConfig field in version v.
func specPath(v string, fields ...string) []string {
	if v == "v1" {
		return append([]string{"spec", "security"}, fields...)
	}
	return append([]string{"spec"}, fields...)
}

// assertDenied checks that err is the API server's report of a denial by
// webhook, and holds want and every CLI line after the object's name.
func assertDenied(t *testing.T, err error, webhookName, want string, cli []string) {
	t.Helper()
	if err == nil {
		t.Fatal("the request was admitted")
	}
	t.Logf("refused: %v", err)
	msg := err.Error()
	if !strings.Contains(msg, fmt.Sprintf("admission webhook %q denied the request", webhookName)) {
		t.Errorf("not denied by %s: %v", webhookName, err)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("the denial lacks %q: %v", want, err)
	}
	for _, l := range cli {
		if !strings.Contains(msg, hcName+": "+l) {
			t.Errorf("the denial lacks the CLI's %q: %v", l, err)
		}
	}
}

func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// installHCCRD applies the engine's HyperConverged CRD, waits until it is
// established and served (crdtest.Apply) and gives the versions it serves. converge's CRD serves v1
// only; to reach the v1beta1 webhook through the API server as well, a
// served v1beta1 version that keeps every field is added when missing.
func installHCCRD(t *testing.T, c client.Client, e *graph.Engine) []string {
	t.Helper()
	crds, err := e.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	var crd *unstructured.Unstructured
	for _, x := range crds {
		if x.Name == "hyperconvergeds" {
			crd = x.Object.DeepCopy()
		}
	}
	if crd == nil {
		t.Fatal("the engine has no hyperconvergeds CRD")
	}
	addV1Beta1(t, crd)
	return crdtest.Apply(t, c, crd)
}

func addV1Beta1(t *testing.T, crd *unstructured.Unstructured) {
	t.Helper()
	vs, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range vs {
		if v.(map[string]any)["name"] == "v1beta1" {
			return
		}
	}
	vs = append(vs, map[string]any{
		"name": "v1beta1", "served": true, "storage": false,
		"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
		"subresources": map[string]any{"status": map[string]any{}},
	})
	if err := unstructured.SetNestedSlice(crd.Object, vs, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
}

// waitForWebhook dry-run creates an invalid object until the API server
// calls the webhook (its configuration takes a moment to be picked up).
func waitForWebhook(t *testing.T, ctx context.Context, c client.Client, version string) {
	t.Helper()
	controlplane.Eventually(t, 30*time.Second, func() bool {
		err := c.Create(ctx, object(t, badCA[version]), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "denied the request")
	})
}
