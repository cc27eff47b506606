package templatevalidator_test

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	tv "github.com/converge-dev/converge/operators/ssp/templatevalidator"
)

// TestWebhookShape checks the exact ValidatingWebhookConfiguration the
// template validator applies through each kind of endpoint, and what its
// registration serves, targets and waits for.
func TestWebhookShape(t *testing.T) {
	w := tv.Webhook(tv.Options{})
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, ec := range webhooktest.EndpointCases() {
		t.Run(ec.Name, func(t *testing.T) {
			webhooktest.CheckShape(t, w, ec.Endpoint, ec.CABundle, &admissionregistrationv1.ValidatingWebhookConfiguration{
				TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
				ObjectMeta: metav1.ObjectMeta{Name: "converge-template-validator"},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{ec.ValidatingWebhook("virtualmachine-admission.ssp.kubevirt.io",
					"/ssp-template-validate-virtualmachines", "kubevirt.io", "v1", "virtualmachines", admissionregistrationv1.Equivalent)},
			})
		})
	}
	if paths, want := webhooktest.Paths(w), []string{"/ssp-template-validate-virtualmachines"}; !slices.Equal(paths, want) {
		t.Errorf("served paths %v, want %v", paths, want)
	}
	if got, want := w.Targets(), []webhook.Target{{Kind: webhook.ValidatingWebhook, Name: "converge-template-validator"}}; !slices.Equal(got, want) {
		t.Errorf("CA injection targets %v, want %v", got, want)
	}
	if want := []string{"virtualmachines.kubevirt.io"}; !slices.Equal(w.CRDs, want) || w.Ready != nil {
		t.Errorf("waits for CRDs %v (and Ready: %v), want %v only", w.CRDs, w.Ready != nil, want)
	}
}
