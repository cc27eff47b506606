package uploadproxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

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

// Setup adds the proxy to mgr on every replica (each one behind the
// Service answers): once the certificate Manager has a certificate and
// Gate opened, it listens on BindAddress and serves HTTPS until the
// manager stops. It reads PVCs, PersistentVolumes, Nodes and the public
// keys' ConfigMap straight through the API server (RBAC: get on each).
func Setup(mgr ctrl.Manager, o SetupOptions) error {
	if o.Certs == nil || o.PublicKeys.Name == "" || o.PublicKeys.Namespace == "" {
		return errors.New("uploadproxy: SetupOptions.Certs and PublicKeys are required")
	}
	if o.BindAddress == "" {
		o.BindAddress = ":8445"
	}
	r := mgr.GetAPIReader()
	log := mgr.GetLogger().WithName("cdi-uploadproxy")
	p, err := New(Options{Reader: r, Log: log,
		PublicKeys: func(ctx context.Context) ([]*ecdsa.PublicKey, error) {
			return uploadtoken.PublicKeys(ctx, r, o.PublicKeys)
		}})
	if err != nil {
		return err
	}
	return mgr.Add(everyReplica(func(ctx context.Context) error {
		select {
		case <-o.Certs.Ready():
		case <-ctx.Done():
			return nil
		}
		if o.Gate != nil {
			if err := o.Gate(ctx); err != nil {
				return nil // ctx ended
			}
		}
		l, err := net.Listen("tcp", o.BindAddress)
		if err != nil {
			return fmt.Errorf("cdi-uploadproxy: listening on %s: %w", o.BindAddress, err)
		}
		log.Info("serving uploads", "address", l.Addr().String())
		return Serve(ctx, l, p, o.Certs.GetCertificate)
	}))
}

// Serve serves h over TLS on l with the certificate getCert gives until
// ctx ends, then shuts down, giving uploads in flight 30s. It gives nil
// once stopped by ctx, else the serving error.
func Serve(ctx context.Context, l net.Listener, h http.Handler, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: getCert}}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(l, "", "") }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-done
	return nil
}

// everyReplica is a manager runnable that runs on every replica.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (f everyReplica) NeedLeaderElection() bool        { return false }
