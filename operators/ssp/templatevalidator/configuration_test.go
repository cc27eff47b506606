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
			// SSP's template-admission hook: DELETE of base templates only.
			tmpl := ec.ValidatingWebhook("template-admission.ssp.kubevirt.io",
				"/ssp-template-validate-templates", "template.openshift.io", "v1", "templates", admissionregistrationv1.Equivalent)
			tmpl.Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}
			tmpl.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"template.kubevirt.io/type": "base"}}
			webhooktest.CheckShape(t, w, ec.Endpoint, ec.CABundle, &admissionregistrationv1.ValidatingWebhookConfiguration{
				TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
				ObjectMeta: metav1.ObjectMeta{Name: "converge-template-validator"},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{ec.ValidatingWebhook("virtualmachine-admission.ssp.kubevirt.io",
					"/ssp-template-validate-virtualmachines", "kubevirt.io", "v1", "virtualmachines", admissionregistrationv1.Equivalent), tmpl},
			})
		})
	}
	if paths, want := webhooktest.Paths(w), []string{"/ssp-template-validate-virtualmachines", "/ssp-template-validate-templates"}; !slices.Equal(paths, want) {
		t.Errorf("served paths %v, want %v", paths, want)
	}
	if got, want := w.Targets(), []webhook.Target{{Kind: webhook.ValidatingWebhook, Name: "converge-template-validator"}}; !slices.Equal(got, want) {
		t.Errorf("CA injection targets %v, want %v", got, want)
	}
	if want := []string{"virtualmachines.kubevirt.io"}; !slices.Equal(w.CRDs, want) || w.Ready != nil {
		t.Errorf("waits for CRDs %v (and Ready: %v), want %v only", w.CRDs, w.Ready != nil, want)
	}
}
