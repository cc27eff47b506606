package guestimage

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/converge-dev/converge/internal/pki"
)

// Registry is an OCI registry (go-containerregistry's pkg/registry,
// blobs in memory) served in the test process, over plain HTTP
// (StartRegistry) or HTTPS (StartTLSRegistry).
type Registry struct {
	// Addr is host:port it listens on.
	Addr string
	// CAPEM is the PEM of the CA that signed the server certificate, nil
	// over plain HTTP. Every TLS registry has its own CA.
	CAPEM []byte
	// Requests counts the requests it answered.
	Requests atomic.Int64
	// Manifests counts the GET requests for manifests (a pull starts
	// with one; a cached image needs none).
	Manifests atomic.Int64

	// transport is what Push uses: one trusting CAPEM over TLS.
	transport http.RoundTripper
}

// StartRegistry serves a registry over plain HTTP on addr ("127.0.0.1:0"
// for any free port) until t ends.
func StartRegistry(t testing.TB, addr string) *Registry {
	t.Helper()
	return startRegistry(t, addr, false)
}

// StartTLSRegistry serves a registry over HTTPS on addr until t ends,
// with a certificate for addr's host (an IP address or a DNS name)
// signed by a fresh CA (internal/pki), valid for a day; the CA is in
// CAPEM, for a client's trust (a DataVolume's or DataImportCron's
// certConfigMap). Clients that do not trust it fail TLS verification.
func StartTLSRegistry(t testing.TB, addr string) *Registry {
	t.Helper()
	return startRegistry(t, addr, true)
}

func startRegistry(t testing.TB, addr string, useTLS bool) *Registry {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("registry on %s: %v", addr, err)
	}
	r := &Registry{Addr: ln.Addr().String(), transport: remote.DefaultTransport}
	if useTLS {
		host, _, _ := net.SplitHostPort(addr)
		cfg, caPEM, err := serverTLS(host)
		if err != nil {
			_ = ln.Close()
			t.Fatalf("registry on %s: %v", addr, err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		tr := remote.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		r.CAPEM, r.transport = caPEM, tr
		ln = tls.NewListener(ln, cfg)
	}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.Requests.Add(1)
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/manifests/") {
			r.Manifests.Add(1)
		}
		h.ServeHTTP(w, req)
	}), ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("registry on %s: %v", r.Addr, err)
		}
	})
	return r
}

// serverTLS gives the server configuration of a certificate for host
// signed by a new CA, and that CA as PEM.
func serverTLS(host string) (*tls.Config, []byte, error) {
	now := time.Now()
	ca, err := pki.IssueCA("guestimage registry CA", now, 24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	leaf, err := pki.IssueServing(ca, []string{host}, now, 24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		return nil, nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ca.CertPEM, nil
}

// Push pushes img as <Addr>/<repository>:<tag> and gives that reference
// and the image's digest.
func (r *Registry) Push(repository, tag string, img v1.Image) (ref string, digest v1.Hash, err error) {
	ref = fmt.Sprintf("%s/%s:%s", r.Addr, repository, tag)
	var opts []name.Option
	if r.CAPEM == nil {
		opts = append(opts, name.Insecure)
	}
	tagged, err := name.NewTag(ref, opts...)
	if err != nil {
		return "", v1.Hash{}, err
	}
	if err := remote.Write(tagged, img, remote.WithTransport(r.transport)); err != nil {
		return "", v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	digest, err = img.Digest()
	return ref, digest, err
}
