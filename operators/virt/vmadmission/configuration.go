package vmadmission

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/internal/webhook"
)

// Names and paths of the webhooks. The paths are virt-api's
// (pkg/virt-api/webhooks: VMValidatePath; KubeVirt splits the VMI one
// into -create and -update).
const (
	// ConfigurationName is the ValidatingWebhookConfiguration's name.
	ConfigurationName = "converge-vm-validator"
	// VirtualMachineWebhookName is the webhook for VirtualMachines.
	VirtualMachineWebhookName = "validate-virtualmachines.vm.converge.dev"
	// VirtualMachineInstanceWebhookName is the webhook for
	// VirtualMachineInstances.
	VirtualMachineInstanceWebhookName = "validate-virtualmachineinstances.vm.converge.dev"
	// VirtualMachinePath is the server path VirtualMachineWebhookName calls.
	VirtualMachinePath = "/virtualmachines-validate"
	// VirtualMachineInstancePath is the server path
	// VirtualMachineInstanceWebhookName calls.
	VirtualMachineInstancePath = "/virtualmachineinstances-validate"
)

// Options configure Webhook.
type Options struct {
	// ObsoleteCPUModels: see Validator.
	ObsoleteCPUModels func() map[string]bool
	// Instancetypes: see Validator.
	Instancetypes client.Reader
	// Clones: see Validator.
	Clones client.Client
	// Ready, when set, holds the registration until it returns nil (the
	// virt operator's gate: a native KubeVirt CR exists).
	Ready func(ctx context.Context) error
}

// Webhook gives the VM validation webhook as internal/webhook registers
// it: the ValidatingWebhookConfiguration converge-vm-validator, one
// webhook for kubevirt.io virtualmachines and one for
// virtualmachineinstances, each on CREATE and UPDATE (not the status
// subresource: status writes are never checked), matchPolicy Equivalent
// (requests in other versions are converted to v1), failurePolicy Fail (a
// VM must not be stored unchecked while the controller is down),
// sideEffects None, timeoutSeconds 10, admissionReviewVersions [v1]. A
// Validator serves both paths. It is registered once the VirtualMachine
// and VirtualMachineInstance CRDs are established, so that failurePolicy
// Fail blocks nothing before converge installs KubeVirt, and then once
// o.Ready returned.
func Webhook(o Options) webhook.Configuration {
	hook := func(name, resource, path string) webhook.ValidatingHook {
		return webhook.ValidatingHook{Name: name, Path: path,
			Group: "kubevirt.io", Version: "v1", Resource: resource, MatchPolicy: admissionregistrationv1.Equivalent}
	}
	v := Validator{ObsoleteCPUModels: o.ObsoleteCPUModels, Instancetypes: o.Instancetypes, Clones: o.Clones}
	return webhook.Configuration{
		Name:    ConfigurationName,
		What:    "the VM validation webhook",
		LogName: "vm-validation",
		Validating: []webhook.ValidatingHook{
			hook(VirtualMachineWebhookName, "virtualmachines", VirtualMachinePath),
			hook(VirtualMachineInstanceWebhookName, "virtualmachineinstances", VirtualMachineInstancePath),
		},
		Handlers: []webhook.Handler{
			{Path: VirtualMachinePath, Handler: &ctrlwebhook.Admission{Handler: v}},
			{Path: VirtualMachineInstancePath, Handler: &ctrlwebhook.Admission{Handler: v}},
		},
		CRDs:  []string{"virtualmachines.kubevirt.io", "virtualmachineinstances.kubevirt.io"},
		Ready: o.Ready,
	}
}
