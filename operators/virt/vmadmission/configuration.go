package vmadmission

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	acv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
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

// Endpoint is where the API server reaches the webhook server, shared
// with the hco-webhook and the MAC pool (webhookcert.Endpoint).
type Endpoint = webhook.Endpoint

// Register takes a controller-runtime webhook server and serves a
// Validator on both paths.
func Register(srv ctrlwebhook.Server) {
	srv.Register(VirtualMachinePath, &ctrlwebhook.Admission{Handler: Validator{}})
	srv.Register(VirtualMachineInstancePath, &ctrlwebhook.Admission{Handler: Validator{}})
}

// Configuration takes the endpoint and a PEM CA bundle (nil leaves it to
// webhookcert's injection) and gives the ValidatingWebhookConfiguration
// converge-vm-validator: one webhook for kubevirt.io virtualmachines and
// one for virtualmachineinstances, each on CREATE and UPDATE (not the
// status subresource: status writes are never checked), matchPolicy
// Equivalent (requests in other versions are converted to v1),
// failurePolicy Fail (a VM must not be stored unchecked while the
// controller is down), sideEffects None, timeoutSeconds 10,
// admissionReviewVersions [v1].
func Configuration(ep Endpoint, caBundle []byte) *acv1.ValidatingWebhookConfigurationApplyConfiguration {
	hook := func(name, resource, path string) *acv1.ValidatingWebhookApplyConfiguration {
		return ep.ValidatingWebhook(webhook.ValidatingHook{Name: name, Path: path,
			Group: "kubevirt.io", Version: "v1", Resource: resource, MatchPolicy: admissionregistrationv1.Equivalent}, caBundle)
	}
	return acv1.ValidatingWebhookConfiguration(ConfigurationName).WithWebhooks(
		hook(VirtualMachineWebhookName, "virtualmachines", VirtualMachinePath),
		hook(VirtualMachineInstanceWebhookName, "virtualmachineinstances", VirtualMachineInstancePath),
	)
}

// Apply takes a client, the endpoint, a PEM CA bundle (may be nil) and a
// field manager, and creates or updates the configuration with
// server-side apply (forcing ownership of the fields it sets).
func Apply(ctx context.Context, c client.Client, ep Endpoint, caBundle []byte, fieldOwner string) error {
	if ep.Service == nil && ep.URL == "" {
		return fmt.Errorf("ValidatingWebhookConfiguration %s: the webhook endpoint needs a Service or a URL", ConfigurationName)
	}
	if err := c.Apply(ctx, Configuration(ep, caBundle), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("ValidatingWebhookConfiguration %s: applying: %w", ConfigurationName, err)
	}
	return nil
}
