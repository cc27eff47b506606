package hcowebhook

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	acv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/internal/webhook"
)

// Names and paths of the webhook, as HCO's CSV registers them
// (deploy/olm-catalog …clusterserviceversion.yaml webhookdefinitions,
// pkg/util HCOWebhookPath/HCOWebhookV1Beta1Path).
const (
	// ConfigurationName is the ValidatingWebhookConfiguration's name.
	ConfigurationName = "converge-hyperconverged-validator"
	// V1Beta1WebhookName is the webhook for hco.kubevirt.io/v1beta1.
	V1Beta1WebhookName = "validate-hco-v1beta1.kubevirt.io"
	// V1WebhookName is the webhook for hco.kubevirt.io/v1.
	V1WebhookName = "validate-hco.kubevirt.io"
	// V1Beta1Path is the server path V1Beta1WebhookName calls.
	V1Beta1Path = "/validate-hco-kubevirt-io-v1beta1-hyperconverged"
	// V1Path is the server path V1WebhookName calls.
	V1Path = "/validate-hco-kubevirt-io-v1-hyperconverged"
)

// Endpoint is where the API server reaches the webhook server (shared
// with the MAC pool's webhook: webhookcert.Endpoint).
type Endpoint = webhook.Endpoint

// Register takes a controller-runtime webhook server and a Validator and
// serves the Validator on both paths (HCO pkg/webhooks/setup.go
// SetupWebhookWithManager).
func Register(srv ctrlwebhook.Server, v *Validator) {
	srv.Register(V1Beta1Path, &ctrlwebhook.Admission{Handler: v})
	srv.Register(V1Path, &ctrlwebhook.Admission{Handler: v})
}

// Configuration takes the endpoint and a PEM CA bundle (nil leaves the
// caBundle to whoever injects it) and gives the
// ValidatingWebhookConfiguration converge-hyperconverged-validator: one
// webhook per HyperConverged version, each for CREATE and UPDATE of
// hyperconvergeds in its own version (matchPolicy Exact, so a request is
// evaluated once, in the version it was made in), failurePolicy Fail,
// timeoutSeconds 10, sideEffects None, admissionReviewVersions [v1], as
// HCO's CSV webhookdefinitions (HCO also registers DELETE, which converge
// allows without checks, so it is left out).
func Configuration(ep Endpoint, caBundle []byte) *acv1.ValidatingWebhookConfigurationApplyConfiguration {
	hook := func(name, version, path string) *acv1.ValidatingWebhookApplyConfiguration {
		return ep.ValidatingWebhook(webhook.ValidatingHook{Name: name, Path: path,
			Group: "hco.kubevirt.io", Version: version, Resource: "hyperconvergeds", MatchPolicy: admissionregistrationv1.Exact}, caBundle)
	}
	return acv1.ValidatingWebhookConfiguration(ConfigurationName).WithWebhooks(
		hook(V1Beta1WebhookName, "v1beta1", V1Beta1Path),
		hook(V1WebhookName, "v1", V1Path),
	)
}

// Apply takes a client, the endpoint, a PEM CA bundle (may be nil) and a
// field manager, and creates or updates the configuration with
// server-side apply (forcing ownership of the fields it sets).
func Apply(ctx context.Context, c client.Client, ep Endpoint, caBundle []byte, fieldOwner string) error {
	if ep.Service == nil && ep.URL == "" {
		return fmt.Errorf("admission: the webhook endpoint needs a Service or a URL")
	}
	if err := c.Apply(ctx, Configuration(ep, caBundle), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("admission: applying ValidatingWebhookConfiguration %s: %w", ConfigurationName, err)
	}
	return nil
}
