package virtapi

import (
	"context"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/aggregated"
)

// SetupOptions configure Setup: the aggregated server's options
// (BindAddress defaults to ":8443", converge-controller's
// --virt-api-bind-address) and ConsoleToken, Options.ConsoleToken.
type SetupOptions struct {
	aggregated.SetupOptions
	ConsoleToken func(ctx context.Context) (string, error)
}

// Setup adds the server of subresources.kubevirt.io/v1 and its APIService
// to mgr (aggregated.Setup): served on every replica, registered by the
// leader once Gate opens. mgr's scheme must know kubevirt.io/v1 and the
// client-go types. Call it before mgr starts.
func Setup(mgr ctrl.Manager, o SetupOptions) error {
	if o.BindAddress == "" {
		o.BindAddress = ":8443"
	}
	return aggregated.Setup(mgr, o.SetupOptions, func(c client.Client, log logr.Logger) aggregated.API {
		return API(Options{Client: c, ConsoleToken: o.ConsoleToken, Log: log.WithName("virt-api")})
	})
}
