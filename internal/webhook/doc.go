// Package webhook is converge-controller's admission and conversion
// webhook plumbing: one certificate manager and one registration path for
// every webhook the controller serves (the hco-webhook and its /convert
// conversion webhook, operators/hco/hcowebhook; the VM validation webhook,
// operators/virt/vmadmission; the MAC pool's mutating webhook,
// operators/network/macpool).
//
// Manager issues and rotates the serving certificate of the webhook
// server: a self-signed CA and a serving certificate kept in one Secret,
// re-issued before they expire, served from memory (GetCertificate) and
// trusted by the API server through the caBundle it injects into the
// ValidatingWebhookConfigurations, MutatingWebhookConfigurations and CRD
// conversion webhooks it targets. The lifetimes follow HCO's certConfig
// (api/v1beta1 HyperConvergedCertConfig: ca 48h/24h, server 24h/12h),
// which HCO hands to KubeVirt, CDI and CNAO; issuing follows KubeVirt
// pkg/certificates/triple, renewal and the CA overlap in the bundle
// KubeVirt pkg/virt-operator/resource/generate/components/secrets.go
// (NextRotationDeadline, MergeCABundle).
//
// Configuration describes one webhook configuration declaratively: its
// name, its validating or mutating hooks, the handlers served per path and
// what it waits for before it is registered. Registrar serves each
// Configuration on a controller-runtime manager's webhook server and, on
// the leader, registers it with server-side apply once its CRDs and the
// certificate are there; the Manager's injection targets are those of the
// Configurations registered. The package knows nothing about what the
// webhooks decide.
package webhook
