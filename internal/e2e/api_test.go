package e2e_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/safebuffer"
	"github.com/converge-dev/converge/internal/testing/virtapitest"
	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

const (
	apiNode = "e2e-api-node"
	apiNS   = "converge-e2e-api"
	apiVM   = "guest"
	apiDom  = apiNS + "_" + apiVM // domain.Name
)

// vmYAML is the VirtualMachine ns/name running the Debian guest of
// hack/guest by direct kernel boot (as vmiYAML), runStrategy Always.
func vmYAML(ns, name, guestDir string) string {
	return fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: %s
  namespace: %s
spec:
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 2
%s`, name, ns, guestDomainYAML(6, "converge.hostname="+name, guestDir))
}

// proc is a background binary of the test, its output in a buffer shown
// when the test fails; it is stopped (SIGTERM, then SIGKILL after 30 s) in
// t.Cleanup.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    *safebuffer.Buffer
	exited chan struct{}
}

func startProc(t *testing.T, name string, argv ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(argv[0], argv[1:]...), out: &safebuffer.Buffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("%s ignored SIGTERM for 30 s; killing it", name)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s output (tail):\n%s", name, lastLines(p.out.String(), 40))
		}
	})
	return p
}

// running fails the test when the process has exited.
func (p *proc) running(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("%s exited (%v); output:\n%s", p.name, p.cmd.ProcessState, lastLines(p.out.String(), 40))
	default:
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestVirtualMachineThroughAPI is issue 5's end-to-end test: a real API
// server with the graph's VM CRDs, the real converge-controller (its
// virt-controller role: VirtualMachine → VMI, the scheduler) and the real
// `converge-node vm --kubeconfig` on a libvirtd started for the test
// (TCG). A VirtualMachine with runStrategy Always gets a VMI, which is
// scheduled on the node the agent registered, runs as a libvirt domain
// whose guest prints its marker on the serial console, and is reported
// Running and Ready, with the VM's printableStatus Running. Patching the
// runStrategy to Halted deletes the VMI: the agent shuts the guest down
// (destroy after the 2 s grace period), undefines the domain and removes
// its finalizer, so the VMI object goes and the VM reads Stopped. Between
// the two, libvirtd is restarted: the guest keeps running, the VMI stays
// Running, and the agent stops the guest through its new connection.
// Once the guest runs, the real `converge vm console` (a ServiceAccount
// bound to the console RBAC, through the virt-api's console subresource)
// reads the guest's marker, types a line the guest's tty echoes, and quits
// on Ctrl+]; a user without the RBAC is refused (testConsole).
// Latencies are logged, not asserted.
func TestVirtualMachineThroughAPI(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	s := startAPIStack(t, apiNode, apiDom, func(cp *controlplane.Env) {
		virtapitest.Start(t, cp) // the console subresource, as converge-controller serves it
	}, "./cmd/converge")
	l, guest, c, cp, dir, stateDir := s.l, s.guest, s.c, s.cp, s.dir, s.stateDir
	converge, ctl, agentProc := s.bins[2], s.ctl, s.agent
	ctx := context.Background()

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apiNS}}); err != nil {
		t.Fatal(err)
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := yaml.UnmarshalStrict([]byte(vmYAML(apiNS, apiVM, guest)), vm); err != nil {
		t.Fatal(err)
	}
	serialLog := filepath.Join(stateDir, "serial", apiDom+"-serial.log")
	key := types.NamespacedName{Namespace: apiNS, Name: apiVM}
	start := time.Now()
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	running := waitFor(t, "the VMI Running and Ready on "+apiNode, 120*time.Second, func() bool {
		ctl.running(t)
		agentProc.running(t)
		if c.Get(ctx, key, vmi) != nil {
			return false
		}
		return vmi.Status.Phase == kubevirtv1.Running && vmiReady(vmi) == corev1.ConditionTrue
	}).Sub(start)
	if vmi.Status.NodeName != apiNode {
		t.Errorf("VMI status.nodeName %q, want %s", vmi.Status.NodeName, apiNode)
	}
	if l := vmi.Labels[scheduler.NodeNameLabel]; l != apiNode {
		t.Errorf("VMI label %s=%q, want %s (set by the scheduler, as KubeVirt's virt-controller)", scheduler.NodeNameLabel, l, apiNode)
	}
	if !controllerutil.ContainsFinalizer(vmi, agent.Finalizer) {
		t.Errorf("VMI finalizers %v, want the agent's %s", vmi.Finalizers, agent.Finalizer)
	}
	if st, err := l.Virsh("domstate", apiDom); err != nil || strings.TrimSpace(st) != "running" {
		t.Errorf("domain %s: %q, %v; want running", apiDom, strings.TrimSpace(st), err)
	}
	vmReady := waitFor(t, "VirtualMachine printableStatus Running", 60*time.Second, func() bool {
		return c.Get(ctx, key, vm) == nil && vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusRunning && vm.Status.Ready
	}).Sub(start)
	onLog := waitFor(t, "the guest's marker in "+serialLog, 120*time.Second, func() bool {
		b, _ := os.ReadFile(serialLog)
		return strings.Contains(string(b), "CONVERGE-GUEST-OK "+apiVM+" ")
	}).Sub(start)
	t.Logf("latency: VM created -> VMI Running/Ready %s; -> VM printableStatus Running %s; -> guest marker in the serial log (polled) %s",
		running.Round(time.Millisecond), vmReady.Round(time.Millisecond), onLog.Round(time.Millisecond))

	// the console, both ways, through the real CLI and the agent's server
	allowed, denied := consoleKubeconfigs(t, c, cp.Config, dir)
	testConsole(t, converge, allowed, denied)

	// libvirtd restarts: the guest keeps running, the agent reconnects
	// (the stop below goes through its new connection) and the VMI stays
	// Running and Ready.
	away := l.RestartLibvirtd(t)
	back := time.Now()
	t.Cleanup(func() { l.RemoveDomain(t, apiDom) }) // before the new daemon stops
	if st, err := l.Virsh("domstate", apiDom); err != nil || strings.TrimSpace(st) != "running" {
		t.Errorf("domain %s after the libvirtd restart: %q, %v; want running", apiDom, strings.TrimSpace(st), err)
	}
	agentProc.running(t)
	reconnected := waitFor(t, "the agent's log line saying it reconnected to libvirtd", 60*time.Second, func() bool {
		agentProc.running(t)
		return strings.Contains(agentProc.out.String(), "hypervisor reconnected")
	}).Sub(back)
	t.Logf("libvirtd restarted: away %s; the agent reconnected (log line polled) %s after it answered", away.Round(time.Millisecond), reconnected.Round(time.Millisecond))
	if err := c.Get(ctx, key, vmi); err != nil || vmi.Status.Phase != kubevirtv1.Running || vmiReady(vmi) != corev1.ConditionTrue {
		t.Errorf("VMI after the libvirtd restart: phase %s ready %s (%v), want Running and Ready", vmi.Status.Phase, vmiReady(vmi), err)
	}

	// Halted: the VMI goes, with its domain
	start = time.Now()
	if err := c.Patch(ctx, vm, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"runStrategy":"Halted"}}`))); err != nil {
		t.Fatal(err)
	}
	domGone := waitFor(t, "domain "+apiDom+" gone from libvirt", 90*time.Second, func() bool {
		agentProc.running(t)
		for _, d := range l.Domains(t) {
			if d == apiDom {
				return false
			}
		}
		return true
	}).Sub(start)
	vmiGone := waitFor(t, "the VMI object deleted", 60*time.Second, func() bool {
		err := c.Get(ctx, key, &kubevirtv1.VirtualMachineInstance{})
		return apierrors.IsNotFound(err)
	}).Sub(start)
	waitFor(t, "VirtualMachine printableStatus Stopped", 60*time.Second, func() bool {
		return c.Get(ctx, key, vm) == nil && vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStopped
	})
	t.Logf("latency: runStrategy Halted -> domain gone %s (grace 2 s, then destroy and undefine); -> VMI object deleted %s",
		domGone.Round(time.Millisecond), vmiGone.Round(time.Millisecond))
	if l.Started {
		if doms := l.Domains(t); len(doms) != 0 {
			t.Errorf("virsh list --all on the test's libvirtd: %q, want nothing", doms)
		}
	}
}

func vmiReady(vmi *kubevirtv1.VirtualMachineInstance) corev1.ConditionStatus {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady {
			return c.Status
		}
	}
	return ""
}

// installCRDs applies the graph's Sync CRD (converge-controller's synccontroller
// watches Syncs) and the CRDs converge-controller's virt roles wait for
// (VirtualMachine/VirtualMachineInstance, KubeVirt, DataVolume, and
// HostPathProvisioner, the virt operator's inputs) and waits until they
// are served.
func installCRDs(t *testing.T, c client.Client) {
	t.Helper()
	engine, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	sync, err := engine.SyncCRD()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(context.Background(), sync, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
		t.Fatalf("installing the Sync CRD: %v", err)
	}
	crdtest.Install(t, c, "virtualmachines", "virtualmachineinstances", "kubevirts", "datavolumes", "hostpathprovisioners", "virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences")
}

// nativeKubeVirt creates the KubeVirt CR marked native that converge's
// virt operator deploys: converge-controller starts virt-controller (and
// derives the VM agent's DaemonSet, whose pods no kubelet runs here; the
// test runs the agent itself) only while one exists.
func nativeKubeVirt(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}}); err != nil {
		t.Fatal(err)
	}
	kv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
		"metadata": map[string]any{"name": "kubevirt", "namespace": "kubevirt",
			"annotations": map[string]any{"converge.dev/operator": "native"}},
		"spec": map[string]any{}}}
	if err := c.Create(ctx, kv); err != nil {
		t.Fatalf("creating the native KubeVirt: %v", err)
	}
}

// consoleSession is a running `converge vm console`.
type consoleSession struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	out, err *safebuffer.Buffer
	exited   chan struct{}
}

// startConsole runs `converge vm console NAME -n NS` with kubeconfig; it
// is killed in t.Cleanup if still running.
func startConsole(t *testing.T, converge, kubeconfig string) *consoleSession {
	t.Helper()
	s := &consoleSession{out: &safebuffer.Buffer{}, err: &safebuffer.Buffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(converge, "--kubeconfig", kubeconfig, "vm", "console", apiVM, "-n", apiNS)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.err
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting converge vm console: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
	return s
}

// wait gives the exit code once the command ended (within timeout).
func (s *consoleSession) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-s.exited:
		return s.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("converge vm console still running after %s; stdout (tail):\n%s\nstderr:\n%s", timeout,
			lastLines(s.out.String(), 10), s.err.String())
		return -1
	}
}

// consoleKubeconfigs creates the ServiceAccounts "console-user" (a Role
// granting get on virtualmachineinstances/console in
// subresources.kubevirt.io: what `converge vm console` needs through the
// virt-api, as KubeVirt's kubevirt.io:edit grants it) and "no-console"
// (no RBAC), and gives a kubeconfig of each (a TokenRequest token) in dir.
func consoleKubeconfigs(t *testing.T, c client.Client, cfg *rest.Config, dir string) (allowed, denied string) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: apiNS, Name: "console"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{"virtualmachineinstances/console"}, Verbs: []string{"get"}}}}))
	must(c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: apiNS, Name: "console"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "console"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: apiNS, Name: "console-user"}}}))
	cs, err := kubernetes.NewForConfig(cfg)
	must(err)
	token := func(sa string) string {
		must(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: apiNS, Name: sa}}))
		tr, err := cs.CoreV1().ServiceAccounts(apiNS).CreateToken(ctx, sa, &authnv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest for ServiceAccount %s/%s: %v", apiNS, sa, err)
		}
		path := filepath.Join(dir, sa+"-kubeconfig")
		kc := clientcmdapi.NewConfig()
		kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
		kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
		kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: sa}
		kc.CurrentContext = "c"
		must(clientcmd.WriteToFile(*kc, path))
		return path
	}
	return token("console-user"), token("no-console")
}

// testConsole attaches the real `converge vm console` to the running
// guest through the virt-api (in-process, internal/testing/virtapitest)
// and the agent's console server: the guest's marker (printed
// every 2 s) shows on its stdout; a line typed on its stdin reaches the
// guest's serial port and comes back as the guest tty's echo; Ctrl+]
// ends it with exit code 0. A user without the console RBAC is refused
// (Forbidden, naming the user) with a non-zero exit code.
func testConsole(t *testing.T, converge, allowed, denied string) {
	start := time.Now()
	s := startConsole(t, converge, allowed)
	marker := waitFor(t, "the guest's marker on the stdout of converge vm console", 60*time.Second, func() bool {
		select {
		case <-s.exited:
			t.Fatalf("converge vm console exited (%v); stderr:\n%s", s.cmd.ProcessState, s.err.String())
		default:
		}
		return strings.Contains(s.out.String(), "CONVERGE-GUEST-OK "+apiVM+" ")
	}).Sub(start)
	typed := fmt.Sprintf("converge-typed-%d", time.Now().UnixNano()%1000000)
	start = time.Now()
	if _, err := io.WriteString(s.stdin, typed+"\r"); err != nil {
		t.Fatalf("typing into converge vm console: %v", err)
	}
	echo := waitFor(t, "the guest tty's echo of "+typed, 30*time.Second, func() bool {
		return strings.Contains(s.out.String(), typed)
	}).Sub(start)
	start = time.Now()
	if _, err := s.stdin.Write([]byte{0x1d}); err != nil { // Ctrl+]
		t.Fatalf("sending Ctrl+] to converge vm console: %v", err)
	}
	if code := s.wait(t, 30*time.Second); code != 0 {
		t.Errorf("converge vm console after Ctrl+]: exit code %d, want 0; stderr:\n%s", code, s.err.String())
	}
	quit := time.Since(start)
	if !strings.Contains(s.err.String(), "Successfully connected to "+apiVM+" console") {
		t.Errorf("converge vm console stderr %q, want the connected banner", s.err.String())
	}
	t.Logf("latency: converge vm console started -> guest marker on its stdout %s; typed line -> echoed by the guest %s; Ctrl+] -> exited %s",
		marker.Round(time.Millisecond), echo.Round(time.Millisecond), quit.Round(time.Millisecond))

	d := startConsole(t, converge, denied)
	_ = d.stdin.Close()
	if code := d.wait(t, 60*time.Second); code == 0 {
		t.Errorf("converge vm console with a token without RBAC: exit code 0, want a refusal; stdout %q", d.out.String())
	}
	if msg := d.err.String(); !strings.Contains(msg, "forbidden") || !strings.Contains(msg, "no-console") {
		t.Errorf("converge vm console with a token without RBAC: stderr %q, want Forbidden naming the ServiceAccount", msg)
	}
	if strings.Contains(d.out.String(), "CONVERGE-GUEST-OK") {
		t.Errorf("the refused session printed guest output: %q", d.out.String())
	}
}
