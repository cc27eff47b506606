package macpool_test

import (
	"context"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/network/macpool"
)

// TestWebhookShape checks the exact MutatingWebhookConfiguration the MAC
// pool applies through each kind of endpoint (upstream kubemacpool's
// mutatevirtualmachines.kubemacpool.io), and what its registration
// serves, targets and waits for.
func TestWebhookShape(t *testing.T) {
	w := macpool.Webhook(nil)
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, ec := range webhooktest.EndpointCases() {
		t.Run(ec.Name, func(t *testing.T) {
			webhooktest.CheckShape(t, w, ec.Endpoint, ec.CABundle, &admissionregistrationv1.MutatingWebhookConfiguration{
				TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
				ObjectMeta: metav1.ObjectMeta{Name: "converge-macpool"},
				Webhooks: []admissionregistrationv1.MutatingWebhook{{
					Name: "mutatevirtualmachines.macpool.converge.dev", ClientConfig: ec.ClientConfig("/mutate-virtualmachines"),
					Rules: []admissionregistrationv1.RuleWithOperations{{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{"kubevirt.io"}, APIVersions: []string{"v1"},
							Resources: []string{"virtualmachines"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
					}},
					MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
					FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
					SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
					ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
					TimeoutSeconds:          ptr.To[int32](10),
					AdmissionReviewVersions: []string{"v1"},
				}},
			})
		})
	}

	if len(w.Handlers) != 1 || w.Handlers[0].Path != "/mutate-virtualmachines" {
		t.Errorf("served paths %v, want [/mutate-virtualmachines]", w.Handlers)
	}
	if got, want := w.Targets(), []webhook.Target{{Kind: webhook.MutatingWebhook, Name: "converge-macpool"}}; !slices.Equal(got, want) {
		t.Errorf("CA injection targets %v, want %v", got, want)
	}
	if want := []string{"virtualmachines.kubevirt.io"}; !slices.Equal(w.CRDs, want) || w.Ready == nil {
		t.Errorf("waits for CRDs %v and Ready %v, want %v and the pool's readiness", w.CRDs, w.Ready != nil, want)
	}
	if w.What != "the MAC pool webhook" || w.LogName != "macpool" {
		t.Errorf("logs as %q/%q, want the MAC pool webhook/macpool", w.What, w.LogName)
	}
}

// TestWebhookWaitsForThePool: the registration's readiness is the pool's,
// and it gives up with its context.
func TestWebhookWaitsForThePool(t *testing.T) {
	ctl, err := macpool.New(nil, nil, macpool.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := macpool.Webhook(ctl).Ready(ctx); err == nil {
		t.Error("Ready gave nil for a pool that never started")
	}
}
