package hcowebhook_test

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
				return admissionregistrationv1.ValidatingWebhook{
					Name: name, ClientConfig: ec.ClientConfig(path),
					Rules: []admissionregistrationv1.RuleWithOperations{{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{"hco.kubevirt.io"}, APIVersions: []string{version},
							Resources: []string{"hyperconvergeds"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
					}},
					MatchPolicy:             ptr.To(admissionregistrationv1.Exact),
					FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
					SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
					TimeoutSeconds:          ptr.To[int32](10),
					AdmissionReviewVersions: []string{"v1"},
				}
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

	var paths []string
	for _, h := range w.Handlers {
		paths = append(paths, h.Path)
	}
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
