package gitserver

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// HTTPOptions configure an HTTP server.
type HTTPOptions struct {
	// TLS serves HTTPS with a certificate of a fresh test CA (CAPEM).
	TLS bool
	// Username and Password, when set, require HTTP basic auth.
	Username, Password string
	// BearerToken, when set, requires "Authorization: Bearer <token>".
	BearerToken string
	// Addr is the host:port to listen on, e.g. "10.250.0.1:0" for a
	// server the pods of the local cluster reach at its node address
	// (internal/testing/cluster.NodeIP); port 0 picks a free port. Empty:
	// 127.0.0.1 on a free port (httptest's default). With TLS, an IP host
	// is added to the certificate's addresses.
	Addr string
}

// HTTP serves every repository below Root with git http-backend.
type HTTP struct {
	*httptest.Server
	// Root holds the repositories; a Repo named n is at URL+"/"+n.
	Root string
	// CAPEM is the PEM of the CA that signed the server certificate (TLS);
	// every server has its own CA.
	CAPEM []byte
	// Requests counts the requests served (authenticated or not).
	Requests atomic.Int64
	// Broken, while true, answers every request with 503.
	Broken atomic.Bool

	down downState // Down, Up and DownMidFetch: down.go
}

// NewHTTP starts a server for the repositories below root, stopped at the
// end of the test.
func NewHTTP(t testing.TB, root string, opts HTTPOptions) *HTTP {
	t.Helper()
	execPath := Git(t, root, "--exec-path")
	backend := &cgi.Handler{
		Path:   filepath.Join(execPath, "git-http-backend"),
		Env:    append([]string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}, Env...),
		Stderr: logWriter{t},
	}
	h := &HTTP{Root: root}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Requests.Add(1)
		if h.Broken.Load() {
			http.Error(w, "broken on purpose", http.StatusServiceUnavailable)
			return
		}
		if !authorized(r, opts) {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if h.cutPack(r) {
			held := h.holdResponse(w)
			backend.ServeHTTP(held, r)
			held.finish()
			return
		}
		backend.ServeHTTP(w, r)
	})
	h.Server = httptest.NewUnstartedServer(handler)
	var ip net.IP
	if opts.Addr != "" {
		host, _, err := net.SplitHostPort(opts.Addr)
		if err != nil {
			t.Fatalf("gitserver: HTTPOptions.Addr %q: want host:port: %v", opts.Addr, err)
		}
		ip = net.ParseIP(host)
		l, err := net.Listen("tcp", opts.Addr)
		if err != nil {
			t.Fatalf("gitserver: listening on %s: %v", opts.Addr, err)
		}
		h.Server.Listener.Close()
		h.Server.Listener = l
	}
	if opts.TLS {
		cert, caPEM := newServerCert(t, ip)
		h.Server.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		h.Server.StartTLS()
		h.CAPEM = caPEM
	} else {
		h.Server.Start()
	}
	t.Cleanup(h.Close)
	return h
}

// RepoURL is the URL of the repository r.
func (h *HTTP) RepoURL(r *Repo) string { return h.URL + "/" + r.Name }

// CertPool is a pool holding CAPEM.
func (h *HTTP) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(h.CAPEM)
	return p
}

func authorized(r *http.Request, o HTTPOptions) bool {
	eq := func(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
	switch {
	case o.BearerToken != "":
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return ok && eq(tok, o.BearerToken)
	case o.Username != "" || o.Password != "":
		u, p, ok := r.BasicAuth()
		return ok && eq(u, o.Username) && eq(p, o.Password)
	}
	return true
}

// logWriter sends git http-backend's stderr to the test log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("git-http-backend: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}
