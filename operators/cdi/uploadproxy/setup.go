package uploadproxy

import (
	"context"
	"crypto/ecdsa"
	"errors"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/webhook"
)

// SetupOptions configure Setup.
type SetupOptions struct {
	// BindAddress is the host:port the proxy listens on (default ":8445",
	// converge-controller's --uploadproxy-bind-address).
	BindAddress string
	// Certs is the certificate Manager whose certificate the proxy serves
	// (converge-controller's webhook certificate, issued for its Service).
	// Required.
	Certs *webhook.Manager
	// PublicKeys is the ConfigMap of the token issuer's public keys
	// (uploadtoken.Options.PublicKeys). Required.
	PublicKeys types.NamespacedName
	// Gate, when set, holds the proxy back until it returns nil (the CDI
	// operator's uploadproxy role: a native CDI exists).
	Gate func(ctx context.Context) error
}

// Setup adds the proxy to mgr on every replica: once the certificate
// Manager has a certificate and Gate opened, it serves HTTPS on
// BindAddress until the manager stops (webhook.Manager.AddServer). It
// reads PVCs, PersistentVolumes, Nodes and the public keys' ConfigMap
// straight through the API server (RBAC: get on each).
func Setup(mgr ctrl.Manager, o SetupOptions) error {
	if o.Certs == nil || o.PublicKeys.Name == "" || o.PublicKeys.Namespace == "" {
		return errors.New("uploadproxy: SetupOptions.Certs and PublicKeys are required")
	}
	if o.BindAddress == "" {
		o.BindAddress = ":8445"
	}
	r := mgr.GetAPIReader()
	p, err := New(Options{Reader: r, Log: mgr.GetLogger().WithName("cdi-uploadproxy"),
		PublicKeys: func(ctx context.Context) ([]*ecdsa.PublicKey, error) {
			return uploadtoken.PublicKeys(ctx, r, o.PublicKeys)
		}})
	if err != nil {
		return err
	}
	return o.Certs.AddServer(mgr, "cdi-uploadproxy", o.BindAddress, p, o.Gate)
}
