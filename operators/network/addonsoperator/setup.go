package addonsoperator

import (
	"context"
	"errors"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/network/macpool"
	"github.com/converge-dev/converge/operators/operand"
)

// Options configure Setup.
type Options struct {
	// Operand are the framework's options (images, namespace, version).
	Operand operand.Options
	// MACPool, when set, runs the MAC pool with these options (its Gate is
	// Setup's); it needs Webhooks.
	MACPool *macpool.SetupOptions
	// Webhooks registers the MAC pool's webhook.
	Webhooks *webhook.Registrar
}

// Setup adds the network operator to mgr (operand.Setup with Operator)
// and, with o.MACPool, the MAC pool held back until a native
// NetworkAddonsConfig with spec.kubeMacPool exists (the pool then reads
// its range from it, and ends the manager with macpool.ErrRangeChanged
// when the range moves), ending the manager with operand.ErrRoleGone
// when the last one goes. mgr's scheme must know the client-go types.
func Setup(mgr ctrl.Manager, engine *graph.Engine, o Options) error {
	if o.MACPool != nil && o.Webhooks == nil {
		return errors.New("addonsoperator: the MAC pool needs Options.Webhooks")
	}
	gates, err := operand.Setup(mgr, engine, Operator(o.MACPool != nil, mgr.GetClient()), o.Operand)
	if err != nil {
		return err
	}
	if o.MACPool == nil {
		return nil
	}
	mp := *o.MACPool
	mp.Gate = func(ctx context.Context) error { return gates.Wait(ctx, RoleMACPool) }
	return macpool.Setup(mgr, o.Webhooks, mp)
}
