package endpoint

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
)

// RunOptions say where and as which node Run serves.
type RunOptions struct {
	// NodeName is the Node that gets the annotations and whose addresses
	// are advertised by default. Required.
	NodeName string
	// BindAddress is the host:port to listen on.
	BindAddress string
	// AdvertiseAddress is the host:port clients dial, published on the
	// Node; empty: AdvertiseAddress's default.
	AdvertiseAddress string
	// CertLifetime is the serving certificate's lifetime.
	CertLifetime time.Duration
	// Log gets the start line ("serving " + the Service's Serves, with the
	// bound and advertised addresses and the fingerprint); zero: discarded.
	Log logr.Logger
}

// Run serves s: it listens on o.BindAddress, reads Node o.NodeName
// through r, works out the advertised address (AdvertiseAddress), makes a
// serving certificate for its host and the node name (NewServingCert),
// publishes the Endpoint on the Node through c (Publish) and serves h over
// TLS (Serve) until ctx ends; then it returns nil. Errors of the listen,
// the Node read and the address start "<Name> server: "; those of the
// certificate and the publication already name them.
func Run(ctx context.Context, c client.Client, r client.Reader, s nodeendpoint.Service, o RunOptions, h http.Handler) error {
	l, err := net.Listen("tcp", o.BindAddress)
	if err != nil {
		return fmt.Errorf("%s server: listen on %s: %w", s.Name, o.BindAddress, err)
	}
	defer l.Close()
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: o.NodeName}, node); err != nil {
		return fmt.Errorf("%s server: Node %s: %w", s.Name, o.NodeName, err)
	}
	addr, err := AdvertiseAddress(s, o.AdvertiseAddress, l.Addr(), node)
	if err != nil {
		return fmt.Errorf("%s server: %w", s.Name, err)
	}
	host, _, _ := net.SplitHostPort(addr)
	cert, err := NewServingCert(s, []string{host, o.NodeName}, time.Now(), o.CertLifetime)
	if err != nil {
		return err
	}
	if err := Publish(ctx, c, s, o.NodeName, nodeendpoint.Endpoint{Address: addr, CertSHA256: cert.SHA256}); err != nil {
		return err
	}
	o.Log.Info("serving "+s.Serves, "bind", l.Addr().String(), "advertise", addr, "certSHA256", cert.SHA256)
	return Serve(ctx, s, l, cert, h)
}

// Serve serves h over TLS (1.2 or later) with cert on l until ctx ends,
// then closes l and the open requests (their contexts derive from ctx,
// 5 s grace) and returns nil; a server error is returned as
// "<Name> server on <addr>: …".
func Serve(ctx context.Context, s nodeendpoint.Service, l net.Listener, cert *ServingCert, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert.TLS}, MinVersion: tls.VersionTLS12},
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// TLS handshake failures (a client with another pin) are not errors
		// of the server
		ErrorLog: log.New(io.Discard, "", 0),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(l, "", "") }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("%s server on %s: %w", s.Name, l.Addr(), err)
	}
}
