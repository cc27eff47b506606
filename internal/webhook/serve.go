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
	return mgr.Add(EveryReplica(func(ctx context.Context) error {
		select {
		case <-m.Ready():
		case <-ctx.Done():
			return nil
		}
		if gate != nil {
			if err := gate(ctx); err != nil {
				if ctx.Err() != nil {
					return nil // the manager stopped first
				}
				return fmt.Errorf("%s: %w", what, err)
			}
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

// EveryReplica is a manager runnable (manager.Runnable and
// LeaderElectionRunnable) that runs on every replica, not only the
// leader: the serving side of webhooks and APIs, which every replica
// behind a Service must answer.
type EveryReplica func(ctx context.Context) error

// Start runs f until ctx ends.
func (f EveryReplica) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection is false: every replica runs it.
func (f EveryReplica) NeedLeaderElection() bool { return false }
