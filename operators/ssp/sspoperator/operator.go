package sspoperator

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/operand"
	"github.com/converge-dev/converge/operators/ssp/templatevalidator"
)

// Name is the operator's name (operand.Operator.Name): field manager
// converge-ssp-operator, owner labels ssp-operator.converge.dev/….
const Name = "ssp-operator"

// CRD is the SSP CRD's name.
const CRD = "ssps.ssp.kubevirt.io"

// RoleTemplateValidator is the template validator's role in
// converge-controller (operand.Role name): ssp-operator's
// virt-template-validator Deployment, served by converge-controller's
// webhook server (operators/ssp/templatevalidator).
const RoleTemplateValidator = "template-validator"

// GVK is the SSP kind, namespaced.
var GVK = schema.GroupVersionKind{Group: "ssp.kubevirt.io", Version: "v1beta3", Kind: "SSP"}

// Operator gives the SSP operator: SSP CRs (namespaced, a singleton as
// ssp-operator allows one SSP per cluster: a second native one reads
// Degraded ExistingDeployment) → components/ssp #Roles, status in the
// controller-lifecycle-operator-sdk's fields that SSP's status embeds
// (conditions, observedGeneration, phase, operatorVersion, targetVersion,
// observedVersion; ssp-operator api/v1beta3 SSPStatus), and, when
// templateValidator, the converge-controller role RoleTemplateValidator,
// whose Stop deletes the template validator's
// ValidatingWebhookConfiguration through c (so that no failurePolicy Fail
// hook is left calling a handler the restarted process no longer serves).
// inputs are the roles' inputs (Inputs: the Template API and the common
// templates found).
func Operator(templateValidator bool, c client.Client, inputs *operand.Inputs) operand.Operator {
	op := operand.Operator{
		Name:      Name,
		GVK:       GVK,
		CRD:       CRD,
		Singleton: true,
		Status:    operand.SDKStatusFields(),
		Inputs:    inputs,
	}
	if templateValidator {
		op.Roles = append(op.Roles, operand.Role{Name: RoleTemplateValidator, Stop: operand.DeleteOnStop(c,
			&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: templatevalidator.ConfigurationName}})})
	}
	return op
}

// Options configure Setup.
type Options struct {
	// Operand are the framework's options (images, version, poll).
	Operand operand.Options
	// TemplateValidator serves the template validator while a native SSP
	// exists (needs Webhooks).
	TemplateValidator bool
	// Webhooks registers the template validator.
	Webhooks *webhook.Registrar
}

// Setup adds the SSP operator to mgr (operand.Setup with Operator, its
// inputs read through a discovery client of mgr's config and mgr's API
// reader) and,
// when o.TemplateValidator, registers the template validator held back
// until a native SSP exists (templatevalidator.Options.Ready on the
// RoleTemplateValidator gate); the manager ends with operand.ErrRoleGone
// when the last native SSP goes.
func Setup(mgr ctrl.Manager, engine *graph.Engine, o Options) error {
	if o.TemplateValidator && o.Webhooks == nil {
		return errors.New("sspoperator: the template validator needs Options.Webhooks")
	}
	d, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("sspoperator: %w", err)
	}
	gates, err := operand.Setup(mgr, engine, Operator(o.TemplateValidator, mgr.GetClient(), Inputs(d, mgr.GetAPIReader())), o.Operand)
	if err != nil || !o.TemplateValidator {
		return err
	}
	return o.Webhooks.Register(templatevalidator.Webhook(templatevalidator.Options{
		Templates: mgr.GetAPIReader(),
		VMs:       mgr.GetAPIReader(),
		Ready:     func(ctx context.Context) error { return gates.Wait(ctx, RoleTemplateValidator) },
	}))
}
