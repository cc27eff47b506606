package endpoint_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/nodeplane/endpoint"
)

var svc = nodeendpoint.Service{Name: "demo", Agent: "converge-node demo", Serves: "demos",
	AddressAnnotation: "demo.example/address", CertSHA256Annotation: "demo.example/cert-sha256"}

// TestAdvertiseAddress checks the address published for a listener, and
// that the messages come from the Service's fields, not from one user's
// words.
func TestAdvertiseAddress(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "n1"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.7"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}}}
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	for _, tt := range []struct {
		name, advertise, bound string
		svc                    nodeendpoint.Service
		node                   *corev1.Node
		want, err              string
	}{
		{"flag wins", "console.example:9000", "[::]:8186", nodeendpoint.Console, node, "console.example:9000", ""},
		{"bad flag", "console.example", "[::]:8186", nodeendpoint.Console, node, "", `console advertise address "console.example": want host:port`},
		{"specific bind", "", "127.0.0.1:8186", nodeendpoint.Console, node, "127.0.0.1:8186", ""},
		{"InternalIP first", "", "[::]:8186", nodeendpoint.Console, node, "10.0.0.5:8186", ""},
		{"no address", "", "0.0.0.0:8186", nodeendpoint.Console, bare, "", "Node n2: no InternalIP or ExternalIP"},
		{"no address names the service", "", "0.0.0.0:9000", svc, bare, "",
			"Node n2: no InternalIP or ExternalIP in status.addresses to advertise the demo on: set the advertise address"},
	} {
		bound, err := net.ResolveTCPAddr("tcp", tt.bound)
		if err != nil {
			t.Fatal(err)
		}
		got, err := endpoint.AdvertiseAddress(tt.svc, tt.advertise, bound, tt.node)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tt.err)) {
			t.Errorf("%s: AdvertiseAddress = %q, %v; want %q, %q", tt.name, got, err, tt.want, tt.err)
		}
	}
}

// TestServePinned serves over TLS with a fresh certificate and checks
// that a client pinned to its fingerprint gets through, one pinned to
// another does not (the error names the annotation to read again), and an
// insecure one does.
func TestServePinned(t *testing.T) {
	cert, err := endpoint.NewServingCert(svc, []string{"127.0.0.1", "n1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if leaf := cert.TLS.Leaf; leaf != nil && nodeendpoint.Fingerprint(leaf) != cert.SHA256 {
		t.Errorf("SHA256 %s is not the leaf's fingerprint", cert.SHA256)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- endpoint.Serve(ctx, svc, l, cert, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	}()
	get := func(pin string, insecure bool) (string, error) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: svc.ClientTLS(pin, insecure)}}
		resp, err := hc.Get("https://" + l.Addr().String() + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	other := strings.Repeat("00", 32)
	for _, tt := range []struct {
		name     string
		pin      string
		insecure bool
		err      string
	}{
		{"pinned", cert.SHA256, false, ""},
		{"other pin", other, false, "certificate SHA-256 " + cert.SHA256 + " is not the pinned " + other + " (the agent restarted? read the Node's demo.example/cert-sha256 again)"},
		{"insecure", other, true, ""},
	} {
		body, err := get(tt.pin, tt.insecure)
		if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) || (err == nil && body != "ok") {
			t.Errorf("%s: GET = %q, %v; want error %q", tt.name, body, err, tt.err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after the context ended: %v, want nil", err)
	}
}
