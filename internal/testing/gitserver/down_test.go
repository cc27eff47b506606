package gitserver

import (
	cryptotls "crypto/tls"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDownUp: a server taken Down refuses connections (git clone fails,
// an HTTP GET gets "connection refused"), and serves again at the same
// URL after Up, over HTTP and HTTPS. DownMidFetch cuts the next pack
// transfer (the clone fails with a truncated response) and leaves the
// server down until Up.
func TestDownUp(t *testing.T) {
	root := t.TempDir()
	r := NewRepo(t, root, "cfg", "main")
	for i := range 20 { // a pack of some size
		r.Commit(t, "c", map[string]string{"f.yaml": strings.Repeat("line of config\n", 50*(i+1))})
	}
	clone := func(h *HTTP) (string, error) {
		dst := filepath.Join(t.TempDir(), "clone")
		cmd := exec.Command("git", "clone", "-q", h.RepoURL(r), dst)
		cmd.Env = append(cmd.Environ(), Env...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	get := func(h *HTTP, tls bool) error {
		c := http.DefaultClient
		if tls {
			c = &http.Client{Transport: &http.Transport{TLSClientConfig: &cryptotls.Config{RootCAs: h.CertPool()}}}
		}
		resp, err := c.Get(h.RepoURL(r) + "/info/refs?service=git-upload-pack")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, tls := range []bool{false, true} {
		h := NewHTTP(t, root, HTTPOptions{TLS: tls})
		url := h.URL
		h.Down()
		if err := get(h, tls); err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("TLS %v: GET while down: %v, want connection refused", tls, err)
		}
		h.Up(t)
		if h.URL != url {
			t.Errorf("TLS %v: URL %s after Up, want %s", tls, h.URL, url)
		}
		if err := get(h, tls); err != nil {
			t.Errorf("TLS %v: GET after Up: %v", tls, err)
		}
	}

	h := NewHTTP(t, root, HTTPOptions{})
	if out, err := clone(h); err != nil {
		t.Fatalf("clone: %v: %s", err, out)
	}
	h.DownMidFetch()
	if out, err := clone(h); err == nil {
		t.Errorf("clone with the pack cut succeeded: %s", out)
	} else {
		t.Logf("clone with the pack cut: %v: %s", err, strings.TrimSpace(out))
	}
	if out, err := clone(h); err == nil || !strings.Contains(out, "Failed to connect") && !strings.Contains(out, "Could not connect") && !strings.Contains(out, "refused") {
		t.Errorf("clone after the cut: %v: %s; want the server down", err, out)
	}
	h.Up(t)
	if out, err := clone(h); err != nil {
		t.Errorf("clone after Up: %v: %s", err, out)
	}
}
