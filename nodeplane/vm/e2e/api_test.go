package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/graph"
	"github.com/converge-dev/converge/internal/controlplane"
	"github.com/converge-dev/converge/internal/safebuffer"
	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/nodeplane/vm/e2e"
	"github.com/converge-dev/converge/virtctl"
)

const (
	apiNode = "e2e-api-node"
	apiNS   = "converge-e2e-api"
	apiVM   = "guest"
	apiDom  = apiNS + "_" + apiVM // domain.Name
)

// vmYAML is a VirtualMachine running the Debian guest of hack/guest by
// direct kernel boot (as vmiYAML), runStrategy Always.
func vmYAML(guestDir string) string {
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
      domain:
        cpu:
          cores: 1
        memory:
          guest: 128Mi
        firmware:
          kernelBoot:
            kernelArgs: console=ttyS0 panic=-1 quiet converge.hostname=%s
            container:
              image: file://%s
              kernelPath: /vmlinuz
              initrdPath: /initrd.gz
        devices:
          autoattachMemBalloon: false
`, apiVM, apiNS, apiVM, guestDir)
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
// Latencies are logged, not asserted.
func TestVirtualMachineThroughAPI(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	l := e2e.StartLibvirt(t)
	bin, err := controlplane.BinDir()
	e2e.Require(t, err == nil && controlplane.Available(bin), "kube-apiserver and etcd are not in bin/: run `make controlplane`")
	guest := e2e.BuildGuest(t)
	bins := e2e.BuildBinaries(t, "./cmd/converge-node", "./cmd/converge-controller")
	node, controller := bins[0], bins[1]
	l.RemoveDomain(t, apiDom) // a leftover of an interrupted run
	t.Cleanup(func() { l.RemoveDomain(t, apiDom) })

	cp, err := controlplane.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() }) // after the binaries stop (cleanups run last-in first-out)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kubevirtv1.AddToScheme(scheme)
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	installCRDs(t, c)

	ctl := startProc(t, "converge-controller", controller, "--kubeconfig", kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--receiver-bind-address", "0",
		"--webhook=false", "--cache-dir", t.TempDir())
	stateDir := filepath.Join(dir, "state")
	agentProc := startProc(t, "converge-node vm", node, "vm", "--kubeconfig", kubeconfig, "--node-name", apiNode,
		"--libvirt-uri", l.URI, "--domain-type", "qemu", "--state-dir", stateDir, "--resync", "5s", "--reserved-memory", "512Mi",
		"--console-bind-address", "127.0.0.1:0")

	// the agent registers its Node for the scheduler
	n := &corev1.Node{}
	waitFor(t, "the Node "+apiNode+" registered by the agent", 60*time.Second, func() bool {
		agentProc.running(t)
		return c.Get(ctx, types.NamespacedName{Name: apiNode}, n) == nil && n.Labels[virtctl.AgentLabel] == "true" &&
			n.Annotations[virtctl.AllocatableAnnotation] != ""
	})
	t.Logf("node %s: %s=%s", apiNode, virtctl.AllocatableAnnotation, n.Annotations[virtctl.AllocatableAnnotation])

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apiNS}}); err != nil {
		t.Fatal(err)
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := yaml.UnmarshalStrict([]byte(vmYAML(guest)), vm); err != nil {
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

// installCRDs applies the graph's Sync CRD (converge-controller's syncctl
// watches Syncs) and VirtualMachine/VirtualMachineInstance CRDs and waits
// until they are served.
func installCRDs(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	engine, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	sync, err := engine.SyncCRD()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, sync, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
		t.Fatalf("installing the Sync CRD: %v", err)
	}
	crds, err := engine.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, crd := range crds {
		if crd.Name == "virtualmachines" || crd.Name == "virtualmachineinstances" {
			if err := c.Patch(ctx, crd.Object, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
				t.Fatalf("installing CRD %s: %v", crd.Name, err)
			}
			n++
		}
	}
	if n != 2 {
		t.Fatalf("the graph gave %d of the 2 VM CRDs", n)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return c.List(ctx, &kubevirtv1.VirtualMachineList{}) == nil && c.List(ctx, &kubevirtv1.VirtualMachineInstanceList{}) == nil
	})
}
