package hcowebhook_test

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/hco/hcowebhook"
)

// TestWebhookShape checks the exact ValidatingWebhookConfiguration the
// hco-webhook applies through each kind of endpoint (HCO's CSV
// webhookdefinitions, less DELETE), and what its registration serves,
// targets and waits for.
func TestWebhookShape(t *testing.T) {
	w := hcowebhook.Webhook(nil, nil)
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, ec := range webhooktest.EndpointCases() {
		t.Run(ec.Name, func(t *testing.T) {
			hook := func(name, version, path string) admissionregistrationv1.ValidatingWebhook {
				return ec.ValidatingWebhook(name, path, "hco.kubevirt.io", version, "hyperconvergeds", admissionregistrationv1.Exact)
			}
			webhooktest.CheckShape(t, w, ec.Endpoint, ec.CABundle, &admissionregistrationv1.ValidatingWebhookConfiguration{
				TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
				ObjectMeta: metav1.ObjectMeta{Name: "converge-hyperconverged-validator"},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{
					hook("validate-hco-v1beta1.kubevirt.io", "v1beta1", "/validate-hco-kubevirt-io-v1beta1-hyperconverged"),
					hook("validate-hco.kubevirt.io", "v1", "/validate-hco-kubevirt-io-v1-hyperconverged"),
				},
			})
		})
	}

	paths := webhooktest.Paths(w)
	if want := []string{hcowebhook.V1Beta1Path, hcowebhook.V1Path, "/convert"}; !slices.Equal(paths, want) {
		t.Errorf("served paths %v, want %v", paths, want)
	}
	wantTargets := []webhook.Target{
		{Kind: webhook.ValidatingWebhook, Name: "converge-hyperconverged-validator"},
		{Kind: webhook.CRDConversion, Name: "hyperconvergeds.hco.kubevirt.io"},
	}
	if got := w.Targets(); !slices.Equal(got, wantTargets) {
		t.Errorf("CA injection targets %v, want %v", got, wantTargets)
	}
	if len(w.CRDs) != 0 || w.Ready == nil {
		t.Errorf("waits for CRDs %v and Ready %v: want no CRD, the engine's CRD generation", w.CRDs, w.Ready != nil)
	}
	if w.What != "the hco-webhook" || w.LogName != "admission" {
		t.Errorf("logs as %q/%q, want the hco-webhook/admission", w.What, w.LogName)
	}
}
