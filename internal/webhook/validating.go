package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	acv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
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
	// Group, Version and Resource are the namespaced resource whose CREATE
	// and UPDATE are sent.
	Group, Version, Resource string
	// MatchPolicy is Exact (only that version) or Equivalent (requests in
	// other versions are converted to it).
	MatchPolicy admissionregistrationv1.MatchPolicyType
}

// ValidatingWebhook gives the apply configuration of h reached through ep
// (AdmissionClientConfig with caBundle; nil leaves it to the Manager's
// injection): operations CREATE and UPDATE (not the status subresource),
// scope Namespaced, h.MatchPolicy, failurePolicy Fail, sideEffects None,
// timeoutSeconds 10, admissionReviewVersions [v1], as HCO's CSV
// webhookdefinitions and virt-api's ValidatingWebhookConfiguration set
// them.
func (ep Endpoint) ValidatingWebhook(h ValidatingHook, caBundle []byte) *acv1.ValidatingWebhookApplyConfiguration {
	return acv1.ValidatingWebhook().WithName(h.Name).WithClientConfig(ep.AdmissionClientConfig(h.Path, caBundle)).
		WithRules(acv1.RuleWithOperations().
			WithOperations(admissionregistrationv1.Create, admissionregistrationv1.Update).
			WithAPIGroups(h.Group).WithAPIVersions(h.Version).WithResources(h.Resource).
			WithScope(admissionregistrationv1.NamespacedScope)).
		WithMatchPolicy(h.MatchPolicy).
		WithFailurePolicy(admissionregistrationv1.Fail).
		WithSideEffects(admissionregistrationv1.SideEffectClassNone).
		WithTimeoutSeconds(10).
		WithAdmissionReviewVersions("v1")
}
