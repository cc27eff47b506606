package cluster

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/converge-dev/converge/internal/images"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
)

// ImageRegistry is the OCI registry (go-containerregistry pkg/registry,
// plain HTTP) serving converge's images on the node address.
type ImageRegistry struct {
	// Endpoint is its "ip:port".
	Endpoint string
	// Mirrored is the registry host containerd pulls from it (ghcr.io).
	Mirrored string
	srv      *httptest.Server

	mu    sync.Mutex
	pulls map[string]int // repository → manifest GETs
}

// Pulls gives how many times the manifest of repository (its path, e.g.
// "converge-dev/converge-controller") was fetched with GET, the request
// that starts a pull (the push's are PUTs and HEADs).
func (r *ImageRegistry) Pulls(repository string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pulls[repository]
}

// count is the registry's handler wrapped to count manifest GETs by
// repository (/v2/<repository>/manifests/<reference>).
func (r *ImageRegistry) count(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet {
			if repo, _, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, "/v2/"), "/manifests/"); ok && strings.HasPrefix(req.URL.Path, "/v2/") {
				r.mu.Lock()
				r.pulls[repo]++
				r.mu.Unlock()
			}
		}
		h.ServeHTTP(w, req)
	})
}

// Close stops the registry.
func (r *ImageRegistry) Close() { r.srv.Close() }

// serveImages starts an ImageRegistry on localcluster.NodeIP, pushes each
// archive's image under its own repository path and tag (the archive's
// Reference), and makes containerd mirror the references' registry host
// to it (localcluster.MirrorRegistry), so that the kubelet pulls
// ghcr.io/converge-dev/...:<version> from it as from ghcr.io. The archives
// must share one registry host.
func serveImages(archives []images.Archive) (*ImageRegistry, error) {
	l, err := net.Listen("tcp", localcluster.NodeIP+":0")
	if err != nil {
		return nil, fmt.Errorf("image registry: %w", err)
	}
	r := &ImageRegistry{Endpoint: l.Addr().String(), pulls: map[string]int{}}
	r.srv = httptest.NewUnstartedServer(r.count(registry.New(registry.Logger(log.New(io.Discard, "", 0)))))
	r.srv.Listener = l
	r.srv.Start()
	for _, a := range archives {
		ref, err := name.ParseReference(a.Reference)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("image %s: %w", a.Path, err)
		}
		host := ref.Context().RegistryStr()
		if r.Mirrored != "" && r.Mirrored != host {
			r.Close()
			return nil, fmt.Errorf("images of two registries, %s and %s", r.Mirrored, host)
		}
		r.Mirrored = host
		img, err := tarball.ImageFromPath(a.Path, nil)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("image %s: %w", a.Path, err)
		}
		local, err := name.ParseReference(strings.Replace(ref.Name(), host, r.Endpoint, 1), name.Insecure)
		if err != nil {
			r.Close()
			return nil, err
		}
		if err := remote.Write(local, img, remote.WithTransport(http.DefaultTransport)); err != nil {
			r.Close()
			return nil, fmt.Errorf("pushing %s to %s: %w", a.Reference, local, err)
		}
	}
	if err := localcluster.MirrorRegistry(r.Mirrored, r.Endpoint); err != nil {
		r.Close()
		return nil, fmt.Errorf("mirroring %s to %s: %w", r.Mirrored, r.Endpoint, err)
	}
	return r, nil
}
