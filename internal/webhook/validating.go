package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	acv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// ValidatingHook says what one validating webhook checks and where the
// API server sends it: converge's validating webhooks (the hco-webhook
// for HyperConverged, operators/hco/hcowebhook; the VM validation webhook,
// operators/virt/vmadmission) differ only in these.
type ValidatingHook struct {
	// Name is the webhook's name, a qualified name such as
	// "validate-hco.kubevirt.io".
	Name string
	// Path is the server path on the Endpoint.
	Path string
	// Group, Version and Resource are the namespaced resource whose
	// Operations are sent.
	Group, Version, Resource string
	// Operations are the operations sent; none: CREATE and UPDATE.
	Operations []admissionregistrationv1.OperationType
	// ObjectSelector, when not empty, sends only the objects with these
	// labels (the webhook's objectSelector matchLabels).
	ObjectSelector map[string]string
	// MatchPolicy is Exact (only that version) or Equivalent (requests in
	// other versions are converted to it).
	MatchPolicy admissionregistrationv1.MatchPolicyType
}

// ValidatingWebhook gives the apply configuration of h reached through ep
// (AdmissionClientConfig with caBundle; nil leaves it to the Manager's
// injection): h.Operations (CREATE and UPDATE when none; not the status
// subresource), h.ObjectSelector when set,
// scope Namespaced, h.MatchPolicy, failurePolicy Fail, sideEffects None,
// timeoutSeconds 10, admissionReviewVersions [v1], as HCO's CSV
// webhookdefinitions and virt-api's ValidatingWebhookConfiguration set
// them.
func (ep Endpoint) ValidatingWebhook(h ValidatingHook, caBundle []byte) *acv1.ValidatingWebhookApplyConfiguration {
	ops := h.Operations
	if len(ops) == 0 {
		ops = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	}
	w := acv1.ValidatingWebhook()
	if len(h.ObjectSelector) > 0 {
		w.WithObjectSelector(metav1ac.LabelSelector().WithMatchLabels(h.ObjectSelector))
	}
	return w.WithName(h.Name).WithClientConfig(ep.AdmissionClientConfig(h.Path, caBundle)).
		WithRules(acv1.RuleWithOperations().
			WithOperations(ops...).
			WithAPIGroups(h.Group).WithAPIVersions(h.Version).WithResources(h.Resource).
			WithScope(admissionregistrationv1.NamespacedScope)).
		WithMatchPolicy(h.MatchPolicy).
		WithFailurePolicy(admissionregistrationv1.Fail).
		WithSideEffects(admissionregistrationv1.SideEffectClassNone).
		WithTimeoutSeconds(10).
		WithAdmissionReviewVersions("v1")
}
