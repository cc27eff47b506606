package console

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure Run.
type Options struct {
	// NodeName is this node: only its VMIs are served, and its Node gets
	// the annotations. Required.
	NodeName string
	// BindAddress is the host:port to listen on.
	BindAddress string
	// AdvertiseAddress is the host:port clients dial, published on the
	// Node; empty: AdvertiseAddress's default (the bound host, else the
	// Node's InternalIP, with the bound port).
	AdvertiseAddress string
	// CertLifetime is the serving certificate's lifetime; the agent makes a
	// new one at every start.
	CertLifetime time.Duration
	// Log receives session and refusal lines; zero: discarded.
	Log logr.Logger
}

// DefaultOptions gives Options for node nodeName: bind :8186, advertise
// the Node's address, a certificate valid one year.
func DefaultOptions(nodeName string) Options {
	return Options{NodeName: nodeName, BindAddress: ":8186", CertLifetime: 365 * 24 * time.Hour}
}

// Run listens on opts.BindAddress, makes a serving certificate for the
// advertised host, publishes the Endpoint on the Node (Publish) and serves
// the console (Server) over TLS until ctx ends; then it closes the
// listener and every session. It returns nil after ctx ends, or the error
// of the listen, the Node read, the publication or the server, naming
// what failed.
func Run(ctx context.Context, c client.Client, opener Opener, opts Options) error {
	if opts.NodeName == "" {
		return errors.New("console server: a node name is required")
	}
	l, err := net.Listen("tcp", opts.BindAddress)
	if err != nil {
		return fmt.Errorf("console server: listen on %s: %w", opts.BindAddress, err)
	}
	defer l.Close()
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: opts.NodeName}, node); err != nil {
		return fmt.Errorf("console server: Node %s: %w", opts.NodeName, err)
	}
	addr, err := AdvertiseAddress(opts.AdvertiseAddress, l.Addr(), node)
	if err != nil {
		return fmt.Errorf("console server: %w", err)
	}
	host, _, _ := net.SplitHostPort(addr)
	cert, err := NewServingCert([]string{host, opts.NodeName}, time.Now(), opts.CertLifetime)
	if err != nil {
		return err
	}
	if err := Publish(ctx, c, opts.NodeName, Endpoint{Address: addr, CertSHA256: cert.SHA256}); err != nil {
		return err
	}
	opts.Log.Info("serving VMI consoles", "bind", l.Addr().String(), "advertise", addr, "certSHA256", cert.SHA256)
	return Serve(ctx, l, cert, NewServer(c, opts.NodeName, opener, opts.Log))
}

// Serve serves h over TLS with cert on l until ctx ends, then closes l and
// the open sessions (their contexts derive from ctx) and returns nil; a
// server error is returned naming the listener.
func Serve(ctx context.Context, l net.Listener, cert *ServingCert, h http.Handler) error {
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
		return fmt.Errorf("console server on %s: %w", l.Addr(), err)
	}
}
