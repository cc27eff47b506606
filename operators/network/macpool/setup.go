package macpool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-dev/converge/internal/crdwait"
	"github.com/converge-dev/converge/internal/webhook"
)

// ErrRangeChanged ends the manager Setup added the pool to when the
// NetworkAddonsConfig names a new range: the pool is rebuilt from scratch
// by the next start, as a kubemacpool Deployment rolls when CNAO changes
// its range.
var ErrRangeChanged = errors.New("macpool: the NetworkAddonsConfig kubeMacPool range changed; restarting to take it")

// SetupOptions configure Setup.
type SetupOptions struct {
	// Pool configures the Controller; a nil RangeSource reads the range
	// from the NetworkAddonsConfig (NetworkAddonsConfigRange).
	Pool Options
	// RangeCheck is how often the NetworkAddonsConfig range is compared
	// with the pool's.
	RangeCheck time.Duration
	// Poll is how often Setup's runnable looks for the VirtualMachine and
	// NetworkAddonsConfig CRDs and then for the NetworkAddonsConfig.
	Poll time.Duration
	// Gate, when set, is waited for after the CRDs instead of the
	// NetworkAddonsConfig's existence (the network operator's: a native
	// NetworkAddonsConfig with kubeMacPool exists); an error other than
	// the context's ends the runnable with it.
	Gate func(ctx context.Context) error
}

// DefaultSetupOptions gives DefaultOptions for the pool, a range check
// every 30 s and a poll every 5 s.
func DefaultSetupOptions() SetupOptions {
	return SetupOptions{Pool: DefaultOptions(), RangeCheck: 30 * time.Second, Poll: 5 * time.Second}
}

// Setup runs the MAC pool in mgr (kubemacpool-mac-controller-manager's
// role): it registers the pool's webhook through webhooks (served at
// once, answering 503 until the pool is ready; registered once it is) and
// adds a leader-only runnable that waits for the VirtualMachine and
// NetworkAddonsConfig CRDs and for the NetworkAddonsConfig (the pool is
// the cnao operand's, deployed by CNAO once one exists; with o.Gate, for
// the gate instead), starts the
// Controller with the NetworkAddonsConfig's range, and then compares the
// range every o.RangeCheck, ending with ErrRangeChanged when it moved.
// The VirtualMachines are watched through a cache of their own, so the
// pool stays cluster-wide when the manager's cache is narrowed to a
// namespace. mgr's scheme must know the client-go types.
func Setup(mgr manager.Manager, webhooks *webhook.Registrar, o SetupOptions) error {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	if o.Pool.RangeSource == nil {
		o.Pool.RangeSource = NetworkAddonsConfigRange(c)
	}
	vms, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	if err := mgr.Add(vms); err != nil {
		return err
	}
	ctl, err := New(c, vms, o.Pool)
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("macpool")
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !crdwait.Wait(ctx, c, o.Poll, "virtualmachines.kubevirt.io", NetworkAddonsConfigCRD) {
			return nil
		}
		if o.Gate != nil {
			if err := o.Gate(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("macpool: %w", err)
			}
		}
		for o.Gate == nil && !nacExists(ctx, c) {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(o.Poll):
			}
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- ctl.Start(ctx) }()
		select {
		case <-ctl.Ready():
		case err := <-errc:
			return err
		case <-ctx.Done():
			return nil
		}
		tick := time.NewTicker(o.RangeCheck)
		defer tick.Stop()
		for {
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
				return nil
			case <-tick.C:
				want, err := o.Pool.RangeSource(ctx)
				if err != nil {
					log.Error(err, "checking the MAC range")
					continue
				}
				if have := ctl.Pool().Range(); !want.IsZero() && want != have {
					log.Info("MAC range changed", "from", have.String(), "to", want.String())
					return fmt.Errorf("%w (from %s to %s)", ErrRangeChanged, have, want)
				}
			}
		}
	})); err != nil {
		return err
	}
	return webhooks.Register(Webhook(ctl))
}

// nacExists reports whether the NetworkAddonsConfig "cluster" can be read.
func nacExists(ctx context.Context, c client.Reader) bool {
	nac := &unstructured.Unstructured{}
	nac.SetGroupVersionKind(NetworkAddonsConfigGVK)
	return c.Get(ctx, types.NamespacedName{Name: NetworkAddonsConfigName}, nac) == nil
}
