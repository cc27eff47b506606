package vmadmission_test

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/virt/vmadmission"
)

// TestWebhookShape checks the exact ValidatingWebhookConfiguration the VM
// validation webhook applies through each kind of endpoint, and what its
// registration serves, targets and waits for.
func TestWebhookShape(t *testing.T) {
	w := vmadmission.Webhook(vmadmission.Options{})
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, ec := range webhooktest.EndpointCases() {
		t.Run(ec.Name, func(t *testing.T) {
			hook := func(name, resource, path string) admissionregistrationv1.ValidatingWebhook {
				return ec.ValidatingWebhook(name, path, "kubevirt.io", "v1", resource, admissionregistrationv1.Equivalent)
			}
			webhooktest.CheckShape(t, w, ec.Endpoint, ec.CABundle, &admissionregistrationv1.ValidatingWebhookConfiguration{
				TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
				ObjectMeta: metav1.ObjectMeta{Name: "converge-vm-validator"},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{
					hook("validate-virtualmachines.vm.converge.dev", "virtualmachines", "/virtualmachines-validate"),
					hook("validate-virtualmachineinstances.vm.converge.dev", "virtualmachineinstances", "/virtualmachineinstances-validate"),
				},
			})
		})
	}

	paths := webhooktest.Paths(w)
	if want := []string{"/virtualmachines-validate", "/virtualmachineinstances-validate"}; !slices.Equal(paths, want) {
		t.Errorf("served paths %v, want %v", paths, want)
	}
	if got, want := w.Targets(), []webhook.Target{{Kind: webhook.ValidatingWebhook, Name: "converge-vm-validator"}}; !slices.Equal(got, want) {
		t.Errorf("CA injection targets %v, want %v", got, want)
	}
	if want := []string{"virtualmachines.kubevirt.io", "virtualmachineinstances.kubevirt.io"}; !slices.Equal(w.CRDs, want) || w.Ready != nil {
		t.Errorf("waits for CRDs %v (and Ready: %v), want %v only", w.CRDs, w.Ready != nil, want)
	}
	if w.What != "the VM validation webhook" || w.LogName != "vm-validation" {
		t.Errorf("logs as %q/%q, want the VM validation webhook/vm-validation", w.What, w.LogName)
	}
}
