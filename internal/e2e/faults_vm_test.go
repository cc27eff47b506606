package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"
)

const (
	faultNode = "e2e-fault-node"
	faultNS   = "converge-e2e-fault"
	faultVM   = "fault-guest"
	faultDom  = faultNS + "_" + faultVM // domain.Name
)

// TestAgentKilledMidBoot is TestVirtualMachineThroughAPI's setup (a real
// API server, converge-controller, `converge-node vm` on a libvirtd of
// the test) with a fault: the agent is killed with SIGKILL as soon as
// the VM's domain shows in libvirt, while the guest is still booting (its
// marker not yet on the serial console), then started again with the
// same flags and state directory. The restarted agent adopts the domain,
// it does not recreate it: nodeplane/vm/agent keeps no state of its own
// and claims a domain whose converge metadata carries the VMI's UID
// (Reconcile), starting it if it is still defined and shut off, observing
// it otherwise. In practice the kill lands while libvirtd is starting the
// domain the first agent defined (virsh shows it paused): libvirtd
// finishes the start on its own and the restarted agent only observes it
// (it logs neither "defined" nor "started"). So the test asserts the same
// VMI (same UID), exactly one domain on the libvirtd with the same libvirt
// UUID (the VMI's UID, so a recreated domain would keep it too) and, when
// it ran at the kill, the same domain id (a new QEMU would get a new one),
// no "defined" from the restarted agent, the VMI Running and Ready, and
// the guest's marker in its serial log. runStrategy Halted then removes
// the VMI and its domain, leaving nothing in libvirt. Timings are logged,
// not asserted.
func TestAgentKilledMidBoot(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	st := startAPIStack(t, faultNode, faultDom, nil)
	l, guest, c, stateDir, agentArgv := st.l, st.guest, st.c, st.stateDir, st.agentArgv
	ctl, agentProc := st.ctl, st.agent
	ctx := context.Background()

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: faultNS}}); err != nil {
		t.Fatal(err)
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := yaml.UnmarshalStrict([]byte(vmYAML(faultNS, faultVM, guest)), vm); err != nil {
		t.Fatal(err)
	}
	serialLog := filepath.Join(stateDir, "serial", faultDom+"-serial.log")
	marker := "CONVERGE-GUEST-OK " + faultVM + " "
	hasMarker := func() bool {
		b, _ := os.ReadFile(serialLog)
		return strings.Contains(string(b), marker)
	}
	key := types.NamespacedName{Namespace: faultNS, Name: faultVM}
	start := time.Now()
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}

	// the domain shows in libvirt: kill the agent there, mid-boot
	defined := waitFor(t, "domain "+faultDom+" in virsh list --all", 120*time.Second, func() bool {
		ctl.running(t)
		agentProc.running(t)
		for _, d := range l.Domains(t) {
			if d == faultDom {
				return true
			}
		}
		return false
	})
	if err := agentProc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL to the agent: %v", err)
	}
	<-agentProc.exited
	killed := time.Now()
	firstOut := agentProc.out.String()
	if hasMarker() {
		t.Fatalf("the guest's marker was already in %s when the agent was killed: not a mid-boot kill", serialLog)
	}
	stateAtKill, _ := l.Virsh("domstate", faultDom)
	uuid, err := l.Virsh("domuuid", faultDom)
	if err != nil {
		t.Fatal(err)
	}
	uuid = strings.TrimSpace(uuid)
	domID, _ := l.Virsh("domid", faultDom) // "-" while shut off
	domID = strings.TrimSpace(domID)
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := c.Get(ctx, key, vmi); err != nil {
		t.Fatalf("the VMI when the agent was killed: %v", err)
	}
	vmiUID := vmi.UID
	t.Logf("agent killed (SIGKILL) %s after the VM's creation, %s after its domain showed: domain %s %s, id %s, uuid %s; VMI uid %s phase %q ready %q",
		killed.Sub(start).Round(time.Millisecond), killed.Sub(defined).Round(time.Millisecond), faultDom,
		strings.TrimSpace(stateAtKill), domID, uuid, vmiUID, vmi.Status.Phase, vmiReady(vmi))

	// the agent again, same flags, same state directory
	agentProc = startProc(t, "converge-node vm (restarted)", agentArgv...)
	restarted := time.Now()
	waitFor(t, "the VMI Running and Ready after the agent's restart", 180*time.Second, func() bool {
		ctl.running(t)
		agentProc.running(t)
		if c.Get(ctx, key, vmi) != nil {
			return false
		}
		if vmi.UID != vmiUID {
			t.Fatalf("the VMI was replaced across the agent's restart: uid %s, was %s (phase %s)", vmi.UID, vmiUID, vmi.Status.Phase)
		}
		if vmi.Status.Phase == kubevirtv1.Failed {
			t.Fatalf("the VMI failed after the agent's restart: %+v", vmi.Status.Conditions)
		}
		return vmi.Status.Phase == kubevirtv1.Running && vmiReady(vmi) == corev1.ConditionTrue
	})
	if vmi.Status.NodeName != faultNode {
		t.Errorf("VMI status.nodeName %q, want %s", vmi.Status.NodeName, faultNode)
	}
	if doms := l.Domains(t); len(doms) != 1 || doms[0] != faultDom {
		t.Errorf("virsh list --all after the agent's restart: %q, want only %s", doms, faultDom)
	}
	if st, err := l.Virsh("domstate", faultDom); err != nil || strings.TrimSpace(st) != "running" {
		t.Errorf("domain %s after the agent's restart: %q, %v; want running", faultDom, strings.TrimSpace(st), err)
	}
	if now, err := l.Virsh("domuuid", faultDom); err != nil || strings.TrimSpace(now) != uuid {
		t.Errorf("domain %s after the agent's restart: uuid %q (%v), want the one before the kill, %s (adopted, not recreated)",
			faultDom, strings.TrimSpace(now), err, uuid)
	}
	if domID != "-" && domID != "" {
		if now, err := l.Virsh("domid", faultDom); err != nil || strings.TrimSpace(now) != domID {
			t.Errorf("domain %s after the agent's restart: id %q (%v), want %s as before the kill (the same QEMU, not a restart)",
				faultDom, strings.TrimSpace(now), err, domID)
		}
		if logged(agentProc.out.String(), "started") {
			t.Errorf("the restarted agent started %s, which ran (id %s) when the first agent was killed", faultDom, domID)
		}
	}
	if logged(agentProc.out.String(), "defined") {
		t.Errorf("the restarted agent defined %s again, which existed when the first agent was killed", faultDom)
	}
	running := time.Now()
	onLog := waitFor(t, "the guest's marker in "+serialLog, 180*time.Second, func() bool {
		agentProc.running(t)
		return hasMarker()
	})
	waitFor(t, "VirtualMachine printableStatus Running", 60*time.Second, func() bool {
		return c.Get(ctx, key, vm) == nil && vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusRunning && vm.Status.Ready
	})
	t.Logf("latency: agent restarted -> VMI Running/Ready %s (%s after the VM's creation); -> guest marker in the serial log (polled) %s (%s after the VM's creation)",
		running.Sub(restarted).Round(time.Millisecond), running.Sub(start).Round(time.Millisecond),
		onLog.Sub(restarted).Round(time.Millisecond), onLog.Sub(start).Round(time.Millisecond))
	t.Logf("the first agent logged defined %v, started %v before its kill; the restarted agent logged defined %v, started %v",
		logged(firstOut, "defined"), logged(firstOut, "started"), logged(agentProc.out.String(), "defined"), logged(agentProc.out.String(), "started"))

	// Halted: the VMI goes, with its domain
	start = time.Now()
	if err := c.Patch(ctx, vm, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"runStrategy":"Halted"}}`))); err != nil {
		t.Fatal(err)
	}
	domGone := waitFor(t, "domain "+faultDom+" gone from libvirt", 90*time.Second, func() bool {
		agentProc.running(t)
		for _, d := range l.Domains(t) {
			if d == faultDom {
				return false
			}
		}
		return true
	}).Sub(start)
	vmiGone := waitFor(t, "the VMI object deleted", 60*time.Second, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, key, &kubevirtv1.VirtualMachineInstance{}))
	}).Sub(start)
	waitFor(t, "VirtualMachine printableStatus Stopped", 60*time.Second, func() bool {
		return c.Get(ctx, key, vm) == nil && vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStopped
	})
	t.Logf("latency: runStrategy Halted -> domain gone %s; -> VMI object deleted %s", domGone.Round(time.Millisecond), vmiGone.Round(time.Millisecond))
	if doms := l.Domains(t); len(doms) != 0 {
		t.Errorf("virsh list --all on the test's libvirtd: %q, want nothing", doms)
	}
}

// logged reports whether an agent's output (zap JSON) has the log line msg
// of nodeplane/vm/agent ("defined", "started") for faultDom.
func logged(out, msg string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"msg":"`+msg+`"`) && strings.Contains(line, faultDom) {
			return true
		}
	}
	return false
}
