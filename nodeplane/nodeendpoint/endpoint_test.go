package nodeendpoint_test

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

	"github.com/converge-dev/converge/nodeplane/nodeendpoint"
)

var svc = nodeendpoint.Service{Name: "demo", Agent: "converge-node demo", Serves: "demos",
	AddressAnnotation: "demo.example/address", CertSHA256Annotation: "demo.example/cert-sha256"}

// TestFromNodeNamesTheService checks that the messages come from the
// Service's fields, not from one user's words.
func TestFromNodeNamesTheService(t *testing.T) {
	sum := strings.Repeat("cd", 32)
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		err         string
	}{
		{"published", map[string]string{svc.AddressAnnotation: "[fd00::1]:9000", svc.CertSHA256Annotation: sum}, ""},
		{"not published", nil, "Node n1: no demo endpoint (annotations demo.example/address and demo.example/cert-sha256): is converge-node demo running there with its demo server?"},
		{"address only", map[string]string{svc.AddressAnnotation: "10.0.0.5:9000"}, `Node n1: demo.example/cert-sha256 "": want 64 lowercase hex digits (SHA-256)`},
		{"upper-case sum", map[string]string{svc.AddressAnnotation: "10.0.0.5:9000", svc.CertSHA256Annotation: strings.ToUpper(sum)}, `Node n1: demo.example/cert-sha256 "CDCD`},
		{"no port", map[string]string{svc.AddressAnnotation: "10.0.0.5", svc.CertSHA256Annotation: sum}, `Node n1: demo.example/address "10.0.0.5": want host:port`},
	} {
		ep, err := svc.FromNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: tt.annotations}})
		if (err == nil) != (tt.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tt.err)) {
			t.Errorf("%s: FromNode error %v, want %q", tt.name, err, tt.err)
		}
		if err == nil && (ep.Address != "[fd00::1]:9000" || ep.CertSHA256 != sum) {
			t.Errorf("%s: FromNode = %+v", tt.name, ep)
		}
	}
	bound := &net.TCPAddr{IP: net.IPv4zero, Port: 9000}
	if _, err := svc.AdvertiseAddress("", bound, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}); err == nil ||
		err.Error() != "Node n2: no InternalIP or ExternalIP in status.addresses to advertise the demo on: set the advertise address" {
		t.Errorf("AdvertiseAddress on a Node without addresses: %v", err)
	}
}

// TestServePinned serves over TLS with a fresh certificate and checks
// that a client pinned to its fingerprint gets through, one pinned to
// another does not (the error names the annotation to read again), and an
// insecure one does.
func TestServePinned(t *testing.T) {
	cert, err := svc.NewServingCert([]string{"127.0.0.1", "n1"}, time.Now(), time.Hour)
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
		done <- svc.Serve(ctx, l, cert, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
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
