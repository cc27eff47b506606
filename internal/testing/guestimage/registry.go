package guestimage

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is an OCI registry (go-containerregistry's pkg/registry,
// blobs in memory) served over plain HTTP in the test process.
type Registry struct {
	// Addr is host:port it listens on.
	Addr string
	// Requests counts the requests it answered.
	Requests atomic.Int64
	// Manifests counts the GET requests for manifests (a pull starts
	// with one; a cached image needs none).
	Manifests atomic.Int64
}

// StartRegistry serves a registry on addr ("127.0.0.1:0" for any free
// port) until t ends.
func StartRegistry(t testing.TB, addr string) *Registry {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("registry on %s: %v", addr, err)
	}
	r := &Registry{Addr: ln.Addr().String()}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.Requests.Add(1)
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/manifests/") {
			r.Manifests.Add(1)
		}
		h.ServeHTTP(w, req)
	})}
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

// Push pushes img as <Addr>/<repository>:<tag> and gives that reference
// and the image's digest.
func (r *Registry) Push(repository, tag string, img v1.Image) (ref string, digest v1.Hash, err error) {
	ref = fmt.Sprintf("%s/%s:%s", r.Addr, repository, tag)
	tagged, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		return "", v1.Hash{}, err
	}
	if err := remote.Write(tagged, img); err != nil {
		return "", v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	digest, err = img.Digest()
	return ref, digest, err
}
