package cli_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/cli"
)

// TestRequestTimeout: against an API server that takes connections and
// never answers, each command that talks to the cluster ends with an
// error naming --request-timeout instead of hanging.
func TestRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(release)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: hung, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: hung, context: {cluster: hung, user: u}}]
current-context: hung
`, hung.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	example := filepath.Join("..", "..", "testdata", "example")
	for _, args := range [][]string{
		{"apply", example},
		{"diff", example},
		{"get", "syncs", "-A"},
	} {
		t.Run(args[0], func(t *testing.T) {
			var out, errb bytes.Buffer
			done := make(chan int, 1)
			go func() {
				done <- cli.Run(append([]string{"--kubeconfig", kubeconfig, "--request-timeout", "500ms"}, args...), &out, &errb)
			}()
			select {
			case code := <-done:
				if code == 0 {
					t.Fatalf("exit 0 against a server that never answers:\n%s%s", out.String(), errb.String())
				}
				if !strings.Contains(errb.String(), "within 500ms (--request-timeout)") {
					t.Errorf("stderr does not name the request timeout:\n%s", errb.String())
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("converge %s still waiting on a server that never answers", strings.Join(args, " "))
			}
		})
	}
}
