package cli_test

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/internal/cli"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/safebuffer"
	"github.com/converge-dev/converge/nodeplane/vm/console"
)

// echoConsoles opens consoles that greet with the domain name and echo
// their input (the real libvirt console is tested in nodeplane/vm/libvirt).
type echoConsoles struct{}

func (echoConsoles) Open(_ context.Context, name string) (io.ReadCloser, error) {
	host, guest := net.Pipe()
	go func() {
		_, _ = guest.Write([]byte("console of " + name + "\r\n"))
		_, _ = io.Copy(guest, guest)
		_ = guest.Close()
	}()
	return host, nil
}

// TestVMConsole runs `converge vm console` through the aggregated API
// (KubeVirt's console subresource, served by converge-controller's virt-api
// in-process) to a console server of node-a (console.Run, published on the
// Node) with echo consoles: a client-certificate kubeconfig (the admin) and
// a token kubeconfig (a ServiceAccount bound to a Role granting
// virtualmachineinstances/console) both get the console; input is echoed and
// Ctrl+] or the end of stdin quits; a user without RBAC is refused with
// 403, and KubeVirt's refusals name the VMI.
func TestVMConsole(t *testing.T) {
	v := newVMCluster(t)
	ctx := t.Context()
	c := v.c
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ns := "console"
	must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}))
	must(c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}))
	for _, vm := range []struct{ name, node string }{{"testvm", "node-a"}, {"unplaced", ""}, {"on-b", "node-b"}} {
		vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vm.name}}
		must(c.Create(ctx, vmi))
		vmi.Status.NodeName, vmi.Status.Phase = vm.node, kubevirtv1.Running
		if vm.node == "" {
			vmi.Status.Phase = kubevirtv1.Pending
		}
		must(c.Status().Update(ctx, vmi))
	}
	// the console subresource, as KubeVirt's kubevirt.io:edit grants it
	must(c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "console"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{"virtualmachineinstances/console"}, Verbs: []string{"get"}}}}))
	must(c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "console"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "console"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "operator"}}}))
	must(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator"}}))
	cs, err := kubernetes.NewForConfig(v.env.Config)
	must(err)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "operator", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	must(err)
	token := tr.Status.Token
	must(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "intruder"}}))
	tr, err = cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "intruder", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	must(err)
	intruderToken := tr.Status.Token

	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := console.DefaultOptions("node-a")
	opts.BindAddress = "127.0.0.1:0"
	go func() { done <- console.Run(sctx, c, echoConsoles{}, opts) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console.Run: %v", err)
		}
	}()
	controlplane.Eventually(t, 30*time.Second, func() bool {
		node := &corev1.Node{}
		return c.Get(ctx, client.ObjectKey{Name: "node-a"}, node) == nil && node.Annotations[nodeendpoint.ConsoleAddressAnnotation] != ""
	})

	// kubeconfigs whose user is a ServiceAccount (a bearer token)
	tokenKubeconfig := func(user, token string) string {
		path := filepath.Join(t.TempDir(), user+"-kubeconfig")
		kc := clientcmdapi.NewConfig()
		kc.Clusters["c"] = &clientcmdapi.Cluster{Server: v.env.Config.Host, CertificateAuthorityData: v.env.Config.CAData}
		kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
		kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: user}
		kc.CurrentContext = "c"
		must(clientcmd.WriteToFile(*kc, path))
		return path
	}
	operatorKubeconfig, intruderKubeconfig := tokenKubeconfig("operator", token), tokenKubeconfig("intruder", intruderToken)

	// run runs converge with stdin fed by the test; it gives the exit code
	// channel and stdin's write end.
	run := func(args ...string) (chan int, *io.PipeWriter, *safebuffer.Buffer, *safebuffer.Buffer) {
		r, w := io.Pipe()
		out, errb := &safebuffer.Buffer{}, &safebuffer.Buffer{}
		code := make(chan int, 1)
		go func() {
			code <- cli.RunWithStdin(ctx, args, r, out, errb)
			_ = r.Close()
		}()
		t.Cleanup(func() { _ = w.Close() })
		return code, w, out, errb
	}
	wait := func(code chan int, errb *safebuffer.Buffer) int {
		t.Helper()
		select {
		case c := <-code:
			return c
		case <-time.After(30 * time.Second):
			t.Fatalf("converge vm console did not end; stderr: %s", errb.String())
			return -1
		}
	}

	t.Run("refusals", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			args []string
			want string
		}{
			{"no VMI", []string{"--kubeconfig", v.kubeconfig, "vm", "console", "ghost", "-n", ns},
				"error: VirtualMachineInstance console/ghost not found (is the VirtualMachine started? converge vm start ghost -n console)"},
			{"not scheduled", []string{"--kubeconfig", v.kubeconfig, "vm", "console", "unplaced", "-n", ns},
				"error: VirtualMachineInstance console/unplaced: VMI is not running"},
			{"no agent", []string{"--kubeconfig", v.kubeconfig, "vm", "console", "on-b", "-n", ns},
				"error: VirtualMachineInstance console/on-b: Node node-b: no console endpoint (annotations vm.converge.dev/console-address and vm.converge.dev/console-cert-sha256): is converge-node vm running there with its console server?"},
			{"no RBAC", []string{"--kubeconfig", intruderKubeconfig, "vm", "console", "testvm", "-n", ns},
				`error: VirtualMachineInstance console/testvm: virtualmachineinstances.subresources.kubevirt.io "testvm" is forbidden: User "system:serviceaccount:console:intruder" cannot get resource "virtualmachineinstances/console" in API group "subresources.kubevirt.io" in the namespace "console"`},
		} {
			code, _, out, errb := run(tt.args...)
			if got := wait(code, errb); got != 1 || !strings.HasPrefix(errb.String(), tt.want) || out.String() != "" {
				t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and stderr starting %q", tt.name, got, out.String(), errb.String(), tt.want)
			}
		}
	})

	t.Run("escape, client certificate", func(t *testing.T) {
		start := time.Now()
		code, stdin, out, errb := run("--kubeconfig", v.kubeconfig, "vm", "console", "testvm", "-n", ns)
		controlplane.Eventually(t, 30*time.Second, func() bool { return strings.Contains(out.String(), "console of console_testvm\r\n") })
		t.Logf("converge vm console: greeting after %s", time.Since(start))
		if _, err := stdin.Write([]byte("uname -a\n")); err != nil {
			t.Fatal(err)
		}
		controlplane.Eventually(t, 30*time.Second, func() bool { return strings.Contains(out.String(), "uname -a\n") })
		// Ctrl+] quits; the byte before it is sent, the ones after it are not
		if _, err := stdin.Write([]byte("x\x1dnot sent")); err != nil {
			t.Fatal(err)
		}
		if got := wait(code, errb); got != 0 {
			t.Fatalf("exit %d after Ctrl+], stderr %q", got, errb.String())
		}
		if want := "Successfully connected to testvm console. The escape sequence is ^]\n"; errb.String() != want {
			t.Errorf("stderr %q, want %q", errb.String(), want)
		}
		if strings.Contains(out.String(), "not sent") {
			t.Errorf("bytes after Ctrl+] reached the console: %q", out.String())
		}
	})

	t.Run("kubeconfig token", func(t *testing.T) {
		// the server frees the VMI's slot once it saw the last session end
		var code chan int
		var stdin *io.PipeWriter
		var out, errb *safebuffer.Buffer
		controlplane.Eventually(t, 10*time.Second, func() bool {
			code, stdin, out, errb = run("--kubeconfig", operatorKubeconfig, "vm", "console", "testvm", "-n", ns)
			for {
				select {
				case <-code:
					return false // refused: an active session still
				default:
				}
				if strings.Contains(out.String(), "console of console_testvm") {
					return true
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
		if _, err := stdin.Write([]byte("hi\n")); err != nil {
			t.Fatal(err)
		}
		controlplane.Eventually(t, 30*time.Second, func() bool { return strings.Contains(out.String(), "hi\n") })
		_ = stdin.Close() // the end of stdin ends the session, as in virtctl
		if got := wait(code, errb); got != 0 {
			t.Fatalf("exit %d at the end of stdin, stderr %q", got, errb.String())
		}
	})
}
