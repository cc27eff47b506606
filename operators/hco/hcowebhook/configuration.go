package hcowebhook

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/internal/graph"
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
	// CRDName is the HyperConverged CRD, whose conversion webhook is
	// served at ConvertPath.
	CRDName = "hyperconvergeds.hco.kubevirt.io"
)

// Webhook takes the render engine and the cluster facts (Validator.Facts)
// and gives the hco-webhook as internal/webhook registers it: the
// ValidatingWebhookConfiguration converge-hyperconverged-validator, one
// webhook per HyperConverged version, each for CREATE and UPDATE of
// hyperconvergeds in its own version (matchPolicy Exact, so a request is
// evaluated once, in the version it was made in), failurePolicy Fail,
// timeoutSeconds 10, sideEffects None, admissionReviewVersions [v1], as
// HCO's CSV webhookdefinitions (HCO also registers DELETE, which converge
// allows without checks, so it is left out). A Validator serves both
// paths (HCO pkg/webhooks/setup.go SetupWebhookWithManager) and a
// Converter serves ConvertPath, the conversion webhook of CRDName. It is
// registered once the engine generated its CRDs (the first render would
// otherwise outlast the webhook timeout).
func Webhook(e *graph.Engine, facts func(context.Context) (map[string]any, error)) webhook.Configuration {
	hook := func(name, version, path string) webhook.ValidatingHook {
		return webhook.ValidatingHook{Name: name, Path: path,
			Group: "hco.kubevirt.io", Version: version, Resource: "hyperconvergeds", MatchPolicy: admissionregistrationv1.Exact}
	}
	v := &Validator{Engine: e, Facts: facts}
	return webhook.Configuration{
		Name:    ConfigurationName,
		What:    "the hco-webhook",
		LogName: "admission", // the logger's name before the package moved, kept for the log lines
		Validating: []webhook.ValidatingHook{
			hook(V1Beta1WebhookName, "v1beta1", V1Beta1Path),
			hook(V1WebhookName, "v1", V1Path),
		},
		Handlers: []webhook.Handler{
			{Path: V1Beta1Path, Handler: &ctrlwebhook.Admission{Handler: v}},
			{Path: V1Path, Handler: &ctrlwebhook.Admission{Handler: v}},
			{Path: ConvertPath, Handler: &Converter{Engine: e}},
		},
		Conversions: []string{CRDName},
		Ready: func(context.Context) error {
			_, err := e.CRDs()
			return err
		},
	}
}
