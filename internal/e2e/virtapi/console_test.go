// Package virtapi_test runs a VMI's serial console end to end through the
// aggregated API: KubeVirt's client (kubevirt.io/client-go, the WebSocket
// code virtctl console runs) → kube-apiserver → converge-controller's
// virt-api (operators/virt/virtapi, in-process) → the console server of the
// VMI's node (nodeplane/vm/console, in-process, as converge-node vm serves
// it) → a console that is a real Unix socket, served by the test as an
// echoing guest (the libvirt console itself is tested in
// nodeplane/vm/libvirt and internal/e2e).
package virtapi_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	kvcorev1 "kubevirt.io/client-go/kubevirt/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/virtapitest"
	"github.com/converge-dev/converge/internal/testing/virtctltest"
	"github.com/converge-dev/converge/nodeplane/vm/console"
)

// socketGuests serves a Unix socket per domain, each connection a guest
// that greets with its domain's name and echoes its input; Open dials it.
type socketGuests struct{ dir string }

func (g socketGuests) serve(t *testing.T, domain string) {
	l, err := net.Listen("unix", filepath.Join(g.dir, domain))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = io.WriteString(conn, "console of "+domain+"\r\n")
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()
}

func (g socketGuests) Open(ctx context.Context, domain string) (io.ReadCloser, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", filepath.Join(g.dir, domain))
}

// TestConsole opens the console of a Running VMI with KubeVirt's client
// as a client-certificate user bound to kubevirt.io:edit (the role the
// virt component renders): the guest's greeting arrives, input is echoed.
// A user without the role is refused with 403 by RBAC; a VMI not running,
// the vnc subresource (converge's domains are headless) and a VMI whose
// node publishes no console endpoint are refused with KubeVirt's 400.
func TestConsole(t *testing.T) {
	controlplane.RequireForTest(t)
	env, c, _ := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme)
	ctx := t.Context()
	crdtest.Install(t, c, "virtualmachines", "virtualmachineinstances")
	virtapitest.Start(t, env)
	applyUserRoles(t, c)
	ns := "default"
	for _, n := range []string{"node-a", "node-b"} {
		must(t, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	for _, v := range []struct {
		name, node string
		phase      kubevirtv1.VirtualMachineInstancePhase
	}{{"testvm", "node-a", kubevirtv1.Running}, {"pending", "", kubevirtv1.Pending}, {"on-b", "node-b", kubevirtv1.Running}} {
		vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v.name}}
		must(t, c.Create(ctx, vmi))
		vmi.Status.NodeName, vmi.Status.Phase = v.node, v.phase
		must(t, c.Status().Update(ctx, vmi))
	}
	guests := socketGuests{dir: t.TempDir()}
	guests.serve(t, "default_testvm")

	// node-a's console server, as converge-node vm runs it
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := console.DefaultOptions("node-a")
	opts.BindAddress = "127.0.0.1:0"
	go func() { done <- console.Run(sctx, c, guests, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console.Run: %v", err)
		}
	})
	controlplane.Eventually(t, 30*time.Second, func() bool {
		node := &corev1.Node{}
		return c.Get(ctx, client.ObjectKey{Name: "node-a"}, node) == nil && node.Annotations[nodeendpoint.ConsoleAddressAnnotation] != ""
	})

	alice := user(t, env, c, "alice", ns, "kubevirt.io:edit")
	start := time.Now()
	s, err := kvcorev1.AsyncSubresourceHelper(alice, "virtualmachineinstances", ns, "testvm", "console", url.Values{})
	if err != nil {
		t.Fatalf("console: %v", err)
	}
	conn := s.AsConn()
	defer conn.Close()
	r := bufio.NewReader(conn)
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "console of default_testvm\r\n" {
		t.Fatalf("greeting %q, %v", line, err)
	}
	t.Logf("console greeting after %s", time.Since(start))
	if _, err := io.WriteString(conn, "uname -a\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "uname -a\n" {
		t.Fatalf("echo %q, %v", line, err)
	}
	_ = conn.Close()

	// the same with the upstream virtctl binary, as a user of a
	// client-certificate kubeconfig: stdin is not a terminal, so virtctl
	// copies it as is; Ctrl+] (0x1d) ends the session
	t.Run("virtctl", func(t *testing.T) {
		virtctl := virtctltest.Path(t)
		u, err := env.AddUser(envtest.User{Name: "alice"}, nil)
		must(t, err)
		kc, err := u.KubeConfig()
		must(t, err)
		kubeconfig := filepath.Join(t.TempDir(), "alice.kubeconfig")
		must(t, os.WriteFile(kubeconfig, kc, 0o600))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, virtctl, "--kubeconfig", kubeconfig, "console", "testvm", "-n", ns)
		stdin, err := cmd.StdinPipe()
		must(t, err)
		stdout, err := cmd.StdoutPipe()
		must(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		must(t, cmd.Start())
		out := bufio.NewReader(stdout)
		readUntil := func(want string) {
			t.Helper()
			var seen strings.Builder
			for !strings.Contains(seen.String(), want) {
				b, err := out.ReadByte()
				if err != nil {
					t.Fatalf("virtctl console: output %q, stderr %q, %v; want %q", seen.String(), stderr.String(), err, want)
				}
				seen.WriteByte(b)
			}
		}
		readUntil("console of default_testvm")
		t.Logf("virtctl console: greeting after %s", time.Since(start))
		_, err = io.WriteString(stdin, "echo from virtctl\n")
		must(t, err)
		readUntil("echo from virtctl")
		_, err = stdin.Write([]byte{29})
		must(t, err)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("virtctl console after Ctrl+]: %v, stderr %q", err, stderr.String())
		}
	})

	bob := user(t, env, c, "bob", ns, "")
	for _, tt := range []struct {
		what, name, sub string
		cfg             *rest.Config
		code            int
	}{
		{"bob, no role", "testvm", "console", bob, 403},
		{"a VMI not running", "pending", "console", alice, 400},
		{"vnc", "testvm", "vnc", alice, 400},
		{"no console endpoint on node-b", "on-b", "console", alice, 400},
		{"no VMI", "ghost", "console", alice, 404},
	} {
		s, err := kvcorev1.AsyncSubresourceHelper(tt.cfg, "virtualmachineinstances", ns, tt.name, tt.sub, url.Values{})
		var ae *kvcorev1.AsyncSubresourceError
		if !errors.As(err, &ae) || ae.GetStatusCode() != tt.code {
			t.Errorf("%s: %v, %v; want status %d", tt.what, s, err, tt.code)
		}
	}

	// The refusal's body is KubeVirt's Status (kubevirt's EnrichError reads it).
	rc, err := rest.RESTClientFor(restConfigFor(alice))
	must(t, err)
	res := rc.Get().AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", ns, "virtualmachineinstances", "pending", "console").Do(ctx)
	if err := res.Error(); err == nil || !strings.Contains(err.Error(), "VMI is not running") {
		t.Errorf("console of a pending VMI: %v, want KubeVirt's \"VMI is not running\"", err)
	}
}

// clientNegotiator decodes the Status of a refusal.
var clientNegotiator = clientgoscheme.Codecs.WithoutConversion()

// restConfigFor gives cfg for a plain REST client of the group.
func restConfigFor(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &kubevirtv1.SchemeGroupVersion
	c.NegotiatedSerializer = clientNegotiator
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// user gives a rest.Config of a client-certificate user, bound in ns to
// clusterRole unless it is empty.
func user(t *testing.T, env *controlplane.Env, c client.Client, name, ns, clusterRole string) *rest.Config {
	t.Helper()
	u, err := env.AddUser(envtest.User{Name: name}, nil)
	must(t, err)
	if clusterRole != "" {
		must(t, c.Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}))
	}
	return u.Config()
}

// applyUserRoles applies KubeVirt's user ClusterRoles and bindings as the
// virt operator derives them from a KubeVirt CR (components/virt
// userroles.cue).
func applyUserRoles(t *testing.T, c client.Client) {
	t.Helper()
	e, err := graph.NewEngine()
	must(t, err)
	cr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
		"metadata": map[string]any{"name": "kubevirt", "namespace": "kubevirt"}}}
	roles, err := e.Roles("KubeVirt", cr, graph.RoleInputs{Namespace: "kubevirt", Images: map[string]string{"node": "n"}})
	must(t, err)
	for _, o := range roles.Objects {
		if k := o.GetKind(); (k == "ClusterRole" || k == "ClusterRoleBinding") && strings.HasPrefix(o.GetName(), "kubevirt.io:") {
			must(t, c.Create(t.Context(), o))
		}
	}
}
