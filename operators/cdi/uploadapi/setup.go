package uploadapi

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/aggregated"
	"github.com/converge-dev/converge/operators/cdi/uploadtoken"
)

// SetupOptions configure Setup: the aggregated server's options
// (BindAddress defaults to ":8444", converge-controller's
// --cdi-api-bind-address; Gate is the CDI operator's cdi-apiserver role)
// and where the signing key is kept and how long tokens live.
type SetupOptions struct {
	aggregated.SetupOptions
	Keys uploadtoken.Options
}

// Setup adds the server of upload.cdi.kubevirt.io/v1beta1 and its
// APIService to mgr (aggregated.Setup): served on every replica,
// registered by the leader once Gate opens and the signing key is ensured
// (uploadtoken.Keeper, retried every Retry; so the public keys are
// published before any token exists). Each replica ensures the key again
// on its first request. RBAC: get, create secrets and get, create, update
// configmaps in the keys' namespace. Call it before mgr starts.
func Setup(mgr ctrl.Manager, o SetupOptions) error {
	if o.BindAddress == "" {
		o.BindAddress = ":8444"
	}
	if o.Retry <= 0 {
		o.Retry = 5 * time.Second
	}
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	keeper := &uploadtoken.Keeper{Client: direct, Options: o.Keys}
	gate := o.Gate
	o.Gate = func(ctx context.Context) error {
		if gate != nil {
			if err := gate(ctx); err != nil {
				return err
			}
		}
		for {
			_, err := keeper.Key(ctx)
			if err == nil {
				return nil
			}
			mgr.GetLogger().WithName("cdi-apiserver").Error(err, "ensuring the upload token signing key; retrying", "after", o.Retry)
			select {
			case <-time.After(o.Retry):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return aggregated.Setup(mgr, o.SetupOptions, func(client.Client, logr.Logger) aggregated.API {
		return API(Options{Key: keeper.Key, Lifetime: o.Keys.TokenLifetime})
	})
}
