package templatevalidator

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/internal/webhook"
)

// Names and path of the webhook.
const (
	// ConfigurationName is the ValidatingWebhookConfiguration's name
	// (SSP's is virt-template-validator; converge's own name keeps the two
	// apart in external mode).
	ConfigurationName = "converge-template-validator"
	// VirtualMachineWebhookName is SSP's webhook name (ssp-operator
	// internal/operands/template-validator/resources.go), so that denials
	// read as they do with SSP.
	VirtualMachineWebhookName = "virtualmachine-admission.ssp.kubevirt.io"
	// VirtualMachinePath is the server path (SSP's is
	// /virtualmachine-validate, webhooks/hook.go VmValidatePath; that name
	// is too close to the VM validation webhook's /virtualmachines-validate
	// on converge's shared webhook server).
	VirtualMachinePath = "/ssp-template-validate-virtualmachines"
	// TemplateWebhookName is SSP's webhook refusing to delete a common
	// template VMs validate against (ssp-operator
	// internal/operands/template-validator/resources.go).
	TemplateWebhookName = "template-admission.ssp.kubevirt.io"
	// TemplatePath is its server path (SSP's is /template-validate,
	// webhooks/hook.go TemplateValidatePath; prefixed as
	// VirtualMachinePath on converge's shared webhook server).
	TemplatePath = "/ssp-template-validate-templates"
)

// Options configure Webhook.
type Options struct {
	// Templates: see Validator. converge-controller passes
	// mgr.GetAPIReader(): one GET per VM write, no informer on a
	// Template API that may never exist.
	Templates client.Reader
	// VMs lists VirtualMachines for the template deletion check
	// (TemplateDeletion); converge-controller passes mgr.GetAPIReader():
	// one LIST per deletion of a common template with rules.
	VMs client.Reader
	// Ready, when set, holds the registration until it returns nil (an
	// SSP operator's gate).
	Ready func(ctx context.Context) error
}

// Webhook gives the template validator as internal/webhook registers it:
// the ValidatingWebhookConfiguration converge-template-validator with
// SSP's two webhooks (ssp-operator
// internal/operands/template-validator/resources.go), failurePolicy Fail
// and sideEffects None as SSP sets them, timeoutSeconds 10,
// admissionReviewVersions [v1]:
//
//   - VirtualMachineWebhookName, for kubevirt.io/v1 virtualmachines on
//     CREATE and UPDATE, matchPolicy Equivalent (SSP lists every served
//     version), served by a Validator at VirtualMachinePath;
//   - TemplateWebhookName, for template.openshift.io/v1 templates on
//     DELETE, objectSelector template.kubevirt.io/type: base, served by a
//     TemplateDeletion (o.VMs) at TemplatePath.
//
// It is registered once the VirtualMachine CRD is established (not the
// Template CRD: rules of a VM's own annotation apply without it, and a
// rule for a resource not served matches nothing), then once o.Ready
// returned.
func Webhook(o Options) webhook.Configuration {
	v := Validator{Templates: o.Templates}
	d := TemplateDeletion{VMs: o.VMs}
	return webhook.Configuration{
		Name:    ConfigurationName,
		What:    "the template validator",
		LogName: "template-validator",
		Validating: []webhook.ValidatingHook{{Name: VirtualMachineWebhookName, Path: VirtualMachinePath,
			Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines", MatchPolicy: admissionregistrationv1.Equivalent}, {
			Name: TemplateWebhookName, Path: TemplatePath, Group: TemplateGVK.Group, Version: TemplateGVK.Version, Resource: "templates",
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}, ObjectSelector: map[string]string{TemplateTypeLabel: "base"},
			MatchPolicy: admissionregistrationv1.Equivalent}},
		Handlers: []webhook.Handler{{Path: VirtualMachinePath, Handler: &ctrlwebhook.Admission{Handler: v}},
			{Path: TemplatePath, Handler: &ctrlwebhook.Admission{Handler: d}}},
		CRDs:  []string{"virtualmachines.kubevirt.io"},
		Ready: o.Ready,
	}
}
