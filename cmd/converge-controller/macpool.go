package main

// The MAC pool (kubemacpool-mac-controller-manager role): macpool's
// Controller on the leader, its mutating webhook registered through
// internal/webhook on the same server and certificate as the hco-webhook.

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
	"github.com/converge-dev/converge/operators/network/macpool"
)

// macPoolFlags configure the MAC pool.
type macPoolFlags struct {
	enabled   bool
	configMap string // name; its namespace is the webhook Secret's
	recheck   time.Duration
	crdPoll   time.Duration
}

// errRangeChanged ends the controller when the NetworkAddonsConfig
// names a new range: the pool is rebuilt from scratch by the next start,
// as a kubemacpool Deployment rolls when CNAO changes its range.
var errRangeChanged = errors.New("macpool: the NetworkAddonsConfig kubeMacPool range changed; restarting to take it")

// nacExists reports whether the NetworkAddonsConfig "cluster" can be read.
func nacExists(ctx context.Context, c client.Reader) bool {
	nac := &unstructured.Unstructured{}
	nac.SetGroupVersionKind(macpool.NetworkAddonsConfigGVK)
	return c.Get(ctx, types.NamespacedName{Name: macpool.NetworkAddonsConfigName}, nac) == nil
}

// setupMACPool registers the pool's webhook through webhooks (served at
// once, answering 503 until the pool is ready; registered once the pool
// is Ready) and adds a leader-only runnable that runs the pool's
// lifecycle: it waits for the VirtualMachine CRD and the
// NetworkAddonsConfig, starts the Controller in namespace ns with the
// NetworkAddonsConfig's range and then checks the range every f.recheck,
// giving errRangeChanged when it moved.
func setupMACPool(mgr manager.Manager, webhooks *webhook.Registrar, f macPoolFlags, ns string) error {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	o := macpool.DefaultOptions()
	o.ConfigMap = types.NamespacedName{Namespace: ns, Name: f.configMap}
	o.RangeSource = macpool.NetworkAddonsConfigRange(c)
	// Its own cache: the pool is cluster-wide even when the manager's
	// cache is narrowed by --watch-namespace.
	vms, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	if err := mgr.Add(vms); err != nil {
		return err
	}
	ctl, err := macpool.New(c, vms, o)
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("macpool")
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		// The pool is the cnao operand's: it starts with the
		// NetworkAddonsConfig the Sync applies (after the CRDs), as
		// kubemacpool is deployed by CNAO once one exists.
		if !crdwait.Wait(ctx, c, f.crdPoll, "virtualmachines.kubevirt.io", macpool.NetworkAddonsConfigCRD) {
			return nil
		}
		for !nacExists(ctx, c) {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(f.crdPoll):
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
		tick := time.NewTicker(f.recheck)
		defer tick.Stop()
		for {
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
				return nil
			case <-tick.C:
				want, err := o.RangeSource(ctx)
				if err != nil {
					log.Error(err, "checking the MAC range")
					continue
				}
				if have := ctl.Pool().Range(); !want.IsZero() && want != have {
					log.Info("MAC range changed", "from", have.String(), "to", want.String())
					return fmt.Errorf("%w (from %s to %s)", errRangeChanged, have, want)
				}
			}
		}
	})); err != nil {
		return err
	}
	return webhooks.Register(macpool.Webhook(ctl))
}
