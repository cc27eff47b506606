package console_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/internal/nodeclient"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/nodeplane/vm/console"
)

// echoOpener gives consoles that greet with the domain name and echo their
// input, and lets the test end them as a stopping domain would.
type echoOpener struct {
	mu     sync.Mutex
	guests map[string]net.Conn // domain name → the guest's end of the last console
}

func (o *echoOpener) Open(_ context.Context, name string) (io.ReadCloser, error) {
	if strings.HasSuffix(name, "_broken") {
		return nil, errors.New("domain " + name + ": no console")
	}
	host, guest := net.Pipe()
	o.mu.Lock()
	o.guests[name] = guest
	o.mu.Unlock()
	go func() {
		_, _ = guest.Write([]byte("console of " + name + "\r\n"))
		_, _ = io.Copy(guest, guest)
		_ = guest.Close()
	}()
	return host, nil
}

// stop ends the domain's console as libvirt does when the domain stops.
func (o *echoOpener) stop(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.guests[name].Close()
}

// env is a real API server with the VM CRDs, a Node, VMIs, two
// ServiceAccounts (one allowed consoles) and a console server of node-a
// started with Run, which published its endpoint on the Node.
type env struct {
	c                  client.Client
	opener             *echoOpener
	ep                 nodeendpoint.Endpoint
	allowed, unallowed string // tokens
	ns                 string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cp, c, _ := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme)
	ctx := t.Context()
	crdtest.Install(t, c, "virtualmachines", "virtualmachineinstances")
	e := &env{c: c, opener: &echoOpener{guests: map[string]net.Conn{}}, ns: "vms"}
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}))
	must(t, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}))
	for _, v := range []struct {
		name, node string
		phase      kubevirtv1.VirtualMachineInstancePhase
	}{{"running", "node-a", kubevirtv1.Running}, {"broken", "node-a", kubevirtv1.Running},
		{"elsewhere", "node-b", kubevirtv1.Running}, {"pending", "node-a", kubevirtv1.Scheduled}, {"unscheduled", "", kubevirtv1.Pending}} {
		vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: v.name}}
		must(t, c.Create(ctx, vmi))
		vmi.Status.NodeName, vmi.Status.Phase = v.node, v.phase
		must(t, c.Status().Update(ctx, vmi))
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	must(t, c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "console"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{"virtualmachineinstances/console"}, Verbs: []string{"get"}}}}))
	must(t, c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "console"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "console"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: e.ns, Name: "operator"}}}))
	e.allowed = saToken(t, c, cs, e.ns, "operator")
	e.unallowed = saToken(t, c, cs, e.ns, "bystander")

	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := console.DefaultOptions("node-a")
	opts.BindAddress = "127.0.0.1:0"
	go func() { done <- console.Run(sctx, c, e.opener, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console.Run: %v", err)
		}
	})
	controlplane.Eventually(t, 30*time.Second, func() bool {
		node := &corev1.Node{}
		if c.Get(ctx, client.ObjectKey{Name: "node-a"}, node) != nil {
			return false
		}
		ep, err := nodeendpoint.Console.FromNode(node)
		e.ep = ep
		return err == nil
	})
	return e
}

func saToken(t *testing.T, c client.Client, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	must(t, c.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// readUntil reads from r until the output contains want.
func readUntil(t *testing.T, r io.Reader, want string) string {
	t.Helper()
	var got bytes.Buffer
	buf := make([]byte, 256)
	for !strings.Contains(got.String(), want) {
		n, err := r.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("reading the console: %v after %q, want %q", err, got.String(), want)
		}
	}
	return got.String()
}

func TestConsole(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()

	t.Run("refusals", func(t *testing.T) {
		for _, tt := range []struct {
			name, token, vmi string
			code             int
			msg              string
		}{
			{"no token", "", "running", http.StatusUnauthorized, "no bearer token"},
			{"bad token", "not-a-token", "running", http.StatusUnauthorized, "the API server did not accept the bearer token"},
			{"no RBAC", e.unallowed, "running", http.StatusForbidden,
				`User "system:serviceaccount:vms:bystander" cannot get resource "virtualmachineinstances/console" in API group "subresources.kubevirt.io" in the namespace "vms"`},
			{"no such VMI", e.allowed, "ghost", http.StatusNotFound, "VirtualMachineInstance vms/ghost not found"},
			{"other node", e.allowed, "elsewhere", http.StatusConflict, "VirtualMachineInstance vms/elsewhere runs on node node-b, not on node node-a"},
			{"unscheduled", e.allowed, "unscheduled", http.StatusConflict, "VirtualMachineInstance vms/unscheduled is not scheduled yet, not on node node-a"},
			{"not running", e.allowed, "pending", http.StatusConflict, "VirtualMachineInstance vms/pending is not running (phase Scheduled)"},
			{"console fails", e.allowed, "broken", http.StatusBadGateway, "opening the serial console: domain vms_broken: no console"},
		} {
			_, err := nodeclient.DialConsole(ctx, e.ep, tt.token, e.ns, tt.vmi)
			var refused *nodeclient.ConsoleRefusedError
			if !errors.As(err, &refused) {
				t.Errorf("%s: Dial = %v, want a refusal %d", tt.name, err, tt.code)
				continue
			}
			if refused.StatusCode != tt.code || !strings.Contains(refused.Message, tt.msg) {
				t.Errorf("%s: refused %d %q, want %d with %q", tt.name, refused.StatusCode, refused.Message, tt.code, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "console server "+e.ep.Address+": ") {
				t.Errorf("%s: error %q does not name the server first", tt.name, err)
			}
		}
	})

	t.Run("wrong pin", func(t *testing.T) {
		ep := e.ep
		ep.CertSHA256 = strings.Repeat("0", 64)
		_, err := nodeclient.DialConsole(ctx, ep, e.allowed, e.ns, "running")
		if err == nil || !strings.Contains(err.Error(), "is not the pinned "+ep.CertSHA256) {
			t.Fatalf("Dial with another pin = %v, want a pinning error", err)
		}
	})

	t.Run("session", func(t *testing.T) {
		start := time.Now()
		s, err := nodeclient.DialConsole(ctx, e.ep, e.allowed, e.ns, "running")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("dial (TLS, TokenReview, SubjectAccessReview, VMI read, upgrade): %s", time.Since(start))
		readUntil(t, s, "console of vms_running\r\n")
		start = time.Now()
		if _, err := s.Write([]byte("hello\n")); err != nil {
			t.Fatal(err)
		}
		readUntil(t, s, "hello\n")
		t.Logf("echo round trip: %s", time.Since(start))

		// one session per VMI
		_, err = nodeclient.DialConsole(ctx, e.ep, e.allowed, e.ns, "running")
		var refused *nodeclient.ConsoleRefusedError
		if !errors.As(err, &refused) || refused.StatusCode != http.StatusConflict || !strings.Contains(refused.Message, "an active console session exists") {
			t.Fatalf("second session: %v, want 409 active console session", err)
		}

		// closing frees the slot: a new session opens once the server saw the close
		must(t, s.Close())
		var s2 io.ReadWriteCloser
		controlplane.Eventually(t, 10*time.Second, func() bool {
			s2, err = nodeclient.DialConsole(ctx, e.ep, e.allowed, e.ns, "running")
			return err == nil
		})
		readUntil(t, s2, "console of vms_running\r\n")

		// the domain stops: the client reads the end of the console
		e.opener.stop("vms_running")
		buf := make([]byte, 64)
		for {
			_, err := s2.Read(buf)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("after the domain stopped: %v, want io.EOF", err)
			}
		}
		_ = s2.Close()
	})
}
