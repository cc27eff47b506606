package gitserver

import (
	cryptotls "crypto/tls"
	"net"
	"net/http"
	"testing"
)

func TestHTTPServesAndAuthenticates(t *testing.T) {
	root := t.TempDir()
	r := NewRepo(t, root, "cfg", "main")
	sha := r.Commit(t, "one", map[string]string{"a.yaml": "a: 1\n"})
	for _, tc := range []struct {
		name string
		opts HTTPOptions
		set  func(*http.Request)
		want int
	}{
		{"anonymous", HTTPOptions{}, func(*http.Request) {}, 200},
		{"basic ok", HTTPOptions{Username: "u", Password: "p"}, func(q *http.Request) { q.SetBasicAuth("u", "p") }, 200},
		{"basic wrong", HTTPOptions{Username: "u", Password: "p"}, func(q *http.Request) { q.SetBasicAuth("u", "x") }, 401},
		{"bearer ok", HTTPOptions{BearerToken: "tok"}, func(q *http.Request) { q.Header.Set("Authorization", "Bearer tok") }, 200},
		{"bearer missing", HTTPOptions{BearerToken: "tok"}, func(*http.Request) {}, 401},
		{"tls", HTTPOptions{TLS: true}, func(*http.Request) {}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHTTP(t, root, tc.opts)
			q, _ := http.NewRequest("GET", h.RepoURL(r)+"/info/refs?service=git-upload-pack", nil)
			tc.set(q)
			resp, err := h.Client().Do(q)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if Git(t, r.Dir, "rev-parse", "main") != sha {
		t.Fatal("commit not on main")
	}
}

// TestHTTPListensOnAddr: with Addr the server listens there (127.0.0.2,
// another loopback address) and, with TLS, its certificate names that IP,
// so a client trusting only the server's CA verifies it.
func TestHTTPListensOnAddr(t *testing.T) {
	root := t.TempDir()
	r := NewRepo(t, root, "cfg", "main")
	r.Commit(t, "one", map[string]string{"a.yaml": "a: 1\n"})
	for _, tls := range []bool{false, true} {
		h := NewHTTP(t, root, HTTPOptions{Addr: "127.0.0.2:0", TLS: tls})
		host, _, err := net.SplitHostPort(h.Listener.Addr().String())
		if err != nil || host != "127.0.0.2" {
			t.Fatalf("TLS %v: listening on %s, want 127.0.0.2", tls, h.Listener.Addr())
		}
		c := http.DefaultClient
		if tls {
			c = &http.Client{Transport: &http.Transport{TLSClientConfig: &cryptotls.Config{RootCAs: h.CertPool()}}}
		}
		resp, err := c.Get(h.RepoURL(r) + "/info/refs?service=git-upload-pack")
		if err != nil {
			t.Fatalf("TLS %v: %v", tls, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("TLS %v: GET %s: status %d, want 200", tls, h.URL, resp.StatusCode)
		}
	}
}
