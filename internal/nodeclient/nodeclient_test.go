package nodeclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/nodeclient"
)

// serve starts a TLS server with h and gives the Endpoint pinned to its
// certificate, as an agent would publish it.
func serve(t *testing.T, h http.Handler) nodeendpoint.Endpoint {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return nodeendpoint.Endpoint{Address: strings.TrimPrefix(srv.URL, "https://"), CertSHA256: nodeendpoint.Fingerprint(srv.Certificate())}
}

func TestNodeOfPV(t *testing.T) {
	pv := func(terms ...corev1.NodeSelectorRequirement) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: terms}}}}}}
	}
	in := func(key string, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	for _, tt := range []struct {
		name string
		pv   *corev1.PersistentVolume
		want string
	}{
		{"hostpath topology", pv(in(v1alpha1.HostpathTopologyKey, "node-a", "node-b")), "node-a"},
		{"hostname", pv(in("kubernetes.io/zone", "z1"), in(corev1.LabelHostname, "node-c")), "node-c"},
		{"NotIn", pv(corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"x"}}), ""},
		{"no values", pv(in(v1alpha1.HostpathTopologyKey)), ""},
		{"no affinity", &corev1.PersistentVolume{}, ""},
	} {
		if got := nodeclient.NodeOfPV(tt.pv); got != tt.want {
			t.Errorf("%s: NodeOfPV = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestUpload posts to a pinned server: the body, size, token and path
// arrive; a refusal is an *UploadRefusedError with the server's line; a
// server with another certificate gets no byte unless insecure.
func TestUpload(t *testing.T) {
	var got struct{ path, auth, ctype, body string }
	var size int64
	ep := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.path, got.auth, got.ctype, got.body, size = r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(b), r.ContentLength
		if got.auth != "Bearer good" {
			http.Error(w, "upload token refused: token expired", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "DataVolume vms/disk: uploaded\n")
	}))
	ctx := context.Background()
	for _, tt := range []struct {
		name, token, path string
		o                 nodeclient.UploadOptions
		pin               string
		answer, err       string
	}{
		{"sync", "good", nodeendpoint.UploadPath, nodeclient.UploadOptions{}, ep.CertSHA256, "DataVolume vms/disk: uploaded", ""},
		{"async", "good", nodeendpoint.UploadAsyncPath, nodeclient.UploadOptions{Async: true}, ep.CertSHA256, "DataVolume vms/disk: uploaded", ""},
		{"refused", "bad", nodeendpoint.UploadPath, nodeclient.UploadOptions{}, ep.CertSHA256, "", "upload server answered 401 Unauthorized: upload token refused: token expired"},
		{"other pin", "good", "", nodeclient.UploadOptions{}, strings.Repeat("00", 32), "", "is not the pinned " + strings.Repeat("00", 32)},
		{"other pin, insecure", "good", nodeendpoint.UploadPath, nodeclient.UploadOptions{Insecure: true}, strings.Repeat("00", 32), "DataVolume vms/disk: uploaded", ""},
	} {
		got.path = ""
		e := nodeendpoint.Endpoint{Address: ep.Address, CertSHA256: tt.pin}
		answer, err := nodeclient.Upload(ctx, e, tt.token, strings.NewReader("image"), 5, tt.o)
		if answer != tt.answer || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: Upload = %q, %v; want %q, %q", tt.name, answer, err, tt.answer, tt.err)
		}
		if got.path != tt.path || (tt.path != "" && (got.body != "image" || size != 5 || got.ctype != "application/octet-stream" || got.auth != "Bearer "+tt.token)) {
			t.Errorf("%s: server got %+v, size %d", tt.name, got, size)
		}
		var re *nodeclient.UploadRefusedError
		if tt.name == "refused" && (!errors.As(err, &re) || re.Code != http.StatusUnauthorized || re.Message != "upload token refused: token expired") {
			t.Errorf("%s: %#v, want an *UploadRefusedError 401", tt.name, err)
		}
	}
}

// TestDialConsole dials a pinned console server: a refusal is a
// *ConsoleRefusedError naming the server, and an accepted session carries
// bytes both ways over the console subprotocol.
func TestDialConsole(t *testing.T) {
	ep := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != nodeendpoint.ConsolePath("vms", "testvm") || r.Header.Get("Authorization") != "Bearer good" {
			http.Error(w, "console: User \"x\" cannot get resource", http.StatusForbidden)
			return
		}
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{nodeendpoint.ConsoleSubprotocol}})
		if err != nil {
			return
		}
		nc := websocket.NetConn(r.Context(), ws, websocket.MessageBinary)
		_, _ = io.Copy(nc, nc)
	}))
	ctx := context.Background()

	_, err := nodeclient.DialConsole(ctx, ep, "bad", "vms", "testvm")
	var re *nodeclient.ConsoleRefusedError
	if !errors.As(err, &re) || re.StatusCode != http.StatusForbidden || re.Address != ep.Address ||
		err.Error() != "console server "+ep.Address+": 403 Forbidden: console: User \"x\" cannot get resource" {
		t.Errorf("DialConsole with a bad token: %v, want a 403 refusal naming the server", err)
	}
	if _, err := nodeclient.DialConsole(ctx, nodeendpoint.Endpoint{Address: "10.0.0.5"}, "good", "vms", "testvm"); err == nil ||
		err.Error() != `console server: vm.converge.dev/console-address "10.0.0.5": want host:port` {
		t.Errorf("DialConsole of a bad endpoint: %v", err)
	}

	s, err := nodeclient.DialConsole(ctx, ep, "good", "vms", "testvm")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hello\n" {
		t.Errorf("echo: %q, %v", buf, err)
	}
}
