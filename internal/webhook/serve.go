package webhook

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// AddServer adds to mgr, on every replica (each one behind the Service
// answers), an HTTPS server of h on bindAddress with m's certificate,
// taken per handshake so a rotation applies at once: once m has its first
// certificate and gate (when non-nil) returned nil, it listens and serves
// until the manager stops, then shuts down, giving requests in flight
// 30 s. what names the server in its log line and errors; a listen or
// serve error ends the manager.
func (m *Manager) AddServer(mgr manager.Manager, what, bindAddress string, h http.Handler, gate func(context.Context) error) error {
	log := mgr.GetLogger().WithName(what)
	return mgr.Add(everyReplica(func(ctx context.Context) error {
		select {
		case <-m.Ready():
		case <-ctx.Done():
			return nil
		}
		if gate != nil && gate(ctx) != nil {
			return nil // ctx ended
		}
		l, err := net.Listen("tcp", bindAddress)
		if err != nil {
			return fmt.Errorf("%s: listening on %s: %w", what, bindAddress, err)
		}
		log.Info("serving", "address", l.Addr().String())
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second,
			TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: m.GetCertificate}}
		done := make(chan error, 1)
		go func() { done <- srv.ServeTLS(l, "", "") }()
		select {
		case err := <-done:
			return fmt.Errorf("%s: %w", what, err)
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
		return nil
	}))
}

// everyReplica is a manager runnable that runs on every replica, not only
// the leader.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (f everyReplica) NeedLeaderElection() bool        { return false }
