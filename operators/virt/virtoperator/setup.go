package virtoperator

import (
	"context"
	"errors"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/operand"
	"github.com/converge-dev/converge/operators/virt/virtapi"
	"github.com/converge-dev/converge/operators/virt/virtcontroller"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
	"github.com/converge-dev/converge/operators/virt/vmadmission"
)

// Options configure Setup.
type Options struct {
	// Operand are the framework's options (images, version, poll).
	Operand operand.Options
	// VirtController, when set, runs virt-controller with these options
	// (its Gate and Ratios are Setup's).
	VirtController *virtcontroller.Options
	// VMValidation serves the VM validation webhook (needs Webhooks).
	VMValidation bool
	// Webhooks registers the VM validation webhook.
	Webhooks *webhook.Registrar
	// VirtAPI, when set, serves the aggregated API subresources.kubevirt.io
	// (virtapi.Setup with these options; its Gate is Setup's) and
	// registers its APIService while a native KubeVirt exists.
	VirtAPI *virtapi.SetupOptions
}

// Setup adds the virt operator to mgr (operand.Setup with Operator) and
// its roles: virt-controller (when o.VirtController is set), the VM
// validation webhook (when o.VMValidation) and the virt-api's APIService
// (when o.VirtAPI is set; its server runs at once), each held back until
// a native KubeVirt CR exists, and ending the manager with operand.ErrRoleGone when
// the last one goes. virt-controller's scheduler takes its ratios, and the
// webhook its obsolete CPU models, from the deployed native KubeVirt
// (Configs). mgr's scheme must know kubevirt.io/v1 and the client-go
// types.
func Setup(mgr ctrl.Manager, engine *graph.Engine, o Options) error {
	if o.VMValidation && o.Webhooks == nil {
		return errors.New("virtoperator: the VM validation webhook needs Options.Webhooks")
	}
	op := Operator(o.Operand.Images["node"], o.VirtController != nil, o.VMValidation, o.VirtAPI != nil, mgr.GetClient())
	gates, err := operand.Setup(mgr, engine, op, o.Operand)
	if err != nil {
		return err
	}
	configs := Configs{Reader: mgr.GetCache(), Log: mgr.GetLogger().WithName(Name)}
	if o.VirtController != nil {
		vo := *o.VirtController
		vo.Gate = func(ctx context.Context) error { return gates.Wait(ctx, RoleVirtController) }
		vo.Ratios = func() scheduler.Ratios { return configs.Get(context.Background()).Ratios }
		if err := virtcontroller.Setup(mgr, vo); err != nil {
			return err
		}
	}
	if o.VirtAPI != nil {
		vo := *o.VirtAPI
		vo.Gate = func(ctx context.Context) error { return gates.Wait(ctx, RoleVirtAPI) }
		if err := virtapi.Setup(mgr, vo); err != nil {
			return err
		}
	}
	if o.VMValidation {
		return o.Webhooks.Register(vmadmission.Webhook(vmadmission.Options{
			ObsoleteCPUModels: func() map[string]bool { return configs.Get(context.Background()).ObsoleteCPUModels },
			Instancetypes:     mgr.GetAPIReader(),
			Clones:            mgr.GetClient(),
			Ready:             func(ctx context.Context) error { return gates.Wait(ctx, RoleVMValidation) },
		}))
	}
	return nil
}
