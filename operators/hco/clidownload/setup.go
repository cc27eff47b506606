package clidownload

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/internal/webhook"
)

// SetupOptions configure Setup.
type SetupOptions struct {
	// Dir holds the binaries (New). Required.
	Dir string
	// BindAddress is where the server listens (default ":8446",
	// converge-controller's --cli-download-bind-address).
	BindAddress string
	// Certs is the certificate Manager whose certificate the server
	// serves (converge-controller's webhook certificate). Required.
	Certs *webhook.Manager
}

// Setup reads Dir (New; its error is Setup's) and adds the server to mgr
// on every replica: once the certificate Manager has a certificate it
// serves HTTPS on BindAddress until the manager stops.
func Setup(mgr ctrl.Manager, o SetupOptions) error {
	if o.Dir == "" || o.Certs == nil {
		return errors.New("clidownload: SetupOptions.Dir and Certs are required")
	}
	if o.BindAddress == "" {
		o.BindAddress = ":8446"
	}
	s, err := New(o.Dir)
	if err != nil {
		return err
	}
	log := mgr.GetLogger().WithName("cli-download")
	return mgr.Add(everyReplica(func(ctx context.Context) error {
		defer s.Close()
		select {
		case <-o.Certs.Ready():
		case <-ctx.Done():
			return nil
		}
		l, err := net.Listen("tcp", o.BindAddress)
		if err != nil {
			return fmt.Errorf("cli-download: listening on %s: %w", o.BindAddress, err)
		}
		log.Info("serving the converge CLI", "address", l.Addr().String(), "binaries", len(s.binaries))
		srv := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second,
			TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: o.Certs.GetCertificate}}
		done := make(chan error, 1)
		go func() { done <- srv.ServeTLS(l, "", "") }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
		return nil
	}))
}

// everyReplica is a manager runnable that runs on every replica.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (f everyReplica) NeedLeaderElection() bool        { return false }
