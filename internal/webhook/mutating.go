package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	acv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
)

// MutatingHook says what one mutating webhook changes and where the API
// server sends it, as ValidatingHook does for a validating one (the MAC
// pool's webhook, operators/network/macpool, is one).
type MutatingHook struct {
	// Name is the webhook's name, a qualified name such as
	// "mutatevirtualmachines.macpool.converge.dev".
	Name string
	// Path is the server path on the Endpoint.
	Path string
	// Group, Version and Resource are the namespaced resource whose CREATE
	// and UPDATE are sent.
	Group, Version, Resource string
	// MatchPolicy is Exact (only that version) or Equivalent (requests in
	// other versions are converted to it).
	MatchPolicy admissionregistrationv1.MatchPolicyType
	// SideEffects is None (empty) or NoneOnDryRun (the webhook writes
	// something on real requests only).
	SideEffects admissionregistrationv1.SideEffectClass
}

// MutatingWebhook gives the apply configuration of h reached through ep
// (AdmissionClientConfig with caBundle; nil leaves it to the Manager's
// injection): operations CREATE and UPDATE (not the status subresource),
// scope Namespaced, h.MatchPolicy, failurePolicy Fail, h.SideEffects
// (default None), reinvocationPolicy Never, timeoutSeconds 10,
// admissionReviewVersions [v1], as upstream kubemacpool's
// MutatingWebhookConfiguration sets them.
func (ep Endpoint) MutatingWebhook(h MutatingHook, caBundle []byte) *acv1.MutatingWebhookApplyConfiguration {
	sideEffects := h.SideEffects
	if sideEffects == "" {
		sideEffects = admissionregistrationv1.SideEffectClassNone
	}
	return acv1.MutatingWebhook().WithName(h.Name).WithClientConfig(ep.AdmissionClientConfig(h.Path, caBundle)).
		WithRules(acv1.RuleWithOperations().
			WithOperations(admissionregistrationv1.Create, admissionregistrationv1.Update).
			WithAPIGroups(h.Group).WithAPIVersions(h.Version).WithResources(h.Resource).
			WithScope(admissionregistrationv1.NamespacedScope)).
		WithMatchPolicy(h.MatchPolicy).
		WithFailurePolicy(admissionregistrationv1.Fail).
		WithSideEffects(sideEffects).
		WithReinvocationPolicy(admissionregistrationv1.NeverReinvocationPolicy).
		WithTimeoutSeconds(10).
		WithAdmissionReviewVersions("v1")
}
