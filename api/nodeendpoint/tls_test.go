package nodeendpoint_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/converge-dev/converge/api/nodeendpoint"
)

// TestClientTLS dials a TLS server with a client pinned to its
// certificate's Fingerprint (accepted), to another fingerprint (refused,
// naming the annotation to read again) and insecure (accepted).
func TestClientTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(srv.Close)
	pin := nodeendpoint.Fingerprint(srv.Certificate())
	other := strings.Repeat("00", 32)
	for _, tt := range []struct {
		name     string
		pin      string
		insecure bool
		err      string
	}{
		{"pinned", pin, false, ""},
		{"other pin", other, false, "certificate SHA-256 " + pin + " is not the pinned " + other + " (the agent restarted? read the Node's demo.example/cert-sha256 again)"},
		{"insecure", other, true, ""},
	} {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: svc.ClientTLS(tt.pin, tt.insecure)}}
		resp, err := hc.Get(srv.URL)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if string(b) != "ok" {
				t.Errorf("%s: body %q", tt.name, b)
			}
		}
		if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: GET error %v, want %q", tt.name, err, tt.err)
		}
	}
}
