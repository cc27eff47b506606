package e2e_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/testing/safebuffer"
	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/vm/libvirt"
)

const (
	namespace = "converge-e2e"
	vmiName   = "guest"
	domName   = namespace + "_" + vmiName // domain.Name
	marker    = "CONVERGE-GUEST-OK " + vmiName + " "
)

// vmiYAML is the VMI the agent serves: the Debian guest of hack/guest by
// direct kernel boot, no NIC, 128 MiB, a 2 s grace period (the busybox
// guest has no ACPI handler, so a shutdown ends in destroy). deleting adds
// a deletionTimestamp, as the API server sets on delete.
func vmiYAML(guestDir string, deleting bool) string {
	del := ""
	if deleting {
		del = "\n  deletionTimestamp: \"2026-01-01T00:00:00Z\""
	}
	return fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: %s
  namespace: %s%s
spec:
  terminationGracePeriodSeconds: 2
%s`, vmiName, namespace, del, guestDomainYAML(2, "converge.hostname="+vmiName, guestDir))
}

// guestDomainYAML is the spec.domain of a VMI running the Debian guest of
// hack/guest by direct kernel boot (1 core, 128 MiB, no balloon), its
// lines indented by indent spaces, ending with the devices map's last
// entry (a caller may add devices after it). args are the kernel
// arguments after the console ones (converge.hostname=… and the like).
func guestDomainYAML(indent int, args, guestDir string) string {
	block := fmt.Sprintf(`domain:
  cpu:
    cores: 1
  memory:
    guest: 128Mi
  firmware:
    kernelBoot:
      kernelArgs: console=ttyS0 panic=-1 quiet %s
      container:
        image: file://%s
        kernelPath: /vmlinuz
        initrdPath: /initrd.gz
  devices:
    autoattachMemBalloon: false
`, args, guestDir)
	pad := strings.Repeat(" ", indent)
	return pad + strings.ReplaceAll(strings.TrimSuffix(block, "\n"), "\n", "\n"+pad) + "\n"
}

// agentProc is a running `converge-node vm` whose stdout lines (the status
// lines) arrive on lines.
type agentProc struct {
	cmd    *exec.Cmd
	lines  chan string
	exited chan struct{}
	stderr string
}

func startAgent(t *testing.T, bin, vmiFile, stateDir string, l *vmtest.Libvirt) *agentProc {
	t.Helper()
	return startAgentArgs(t, bin, vmiFile, stateDir, l)
}

// await reads status lines until one equals want; it fails the test when
// the agent exits or guard passes first (a hang guard, not a timing
// assertion).
func (p *agentProc) await(t *testing.T, want string, guard time.Duration) {
	t.Helper()
	timer := time.NewTimer(guard)
	defer timer.Stop()
	var seen []string
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("converge-node vm exited before %q; status lines %q; log:\n%s", want, seen, tailFile(p.stderr))
			}
			t.Logf("agent: %s", line)
			if line == want {
				return
			}
			seen = append(seen, line)
		case <-timer.C:
			t.Fatalf("no %q from converge-node vm within %s; status lines %q; log:\n%s", want, guard, seen, tailFile(p.stderr))
		}
	}
}

// stop sends SIGTERM and waits for the exit; it is idempotent.
func (p *agentProc) stop(t *testing.T) error {
	t.Helper()
	select {
	case <-p.exited:
		return exitErr(p.cmd)
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	go func() {
		for range p.lines { // drain, so the reader goroutine ends
		}
	}()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("converge-node vm ignored SIGTERM for 30 s; killing it")
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return exitErr(p.cmd)
}

func exitErr(cmd *exec.Cmd) error {
	if cmd.ProcessState != nil && !cmd.ProcessState.Success() {
		return errors.New(cmd.ProcessState.String())
	}
	return nil
}

// TestGuestBootsThroughAgent boots the Debian guest through the real
// `converge-node vm` binary on a libvirtd started for the test (TCG, never
// kvm) and checks the node agent's contract end to end:
//   - the VMI is reported Running and Ready;
//   - the guest's marker shows on the serial console read through a
//     libvirt stream (libvirt.Conn.OpenConsole) and in the serial log
//     <state-dir>/serial/<namespace>_<name>-serial.log;
//   - SIGTERM stops the agent and leaves the domain running (a
//     virt-handler restart does not kill VMs);
//   - a new agent given the VMI marked as deleted shuts the domain down
//     (destroy after the grace period), undefines it and reports the VMI
//     removed; libvirt has no domain left.
//
// Boot latencies are logged, not asserted.
func TestGuestBootsThroughAgent(t *testing.T) {
	l := vmtest.StartLibvirt(t)
	guest := vmtest.BuildGuest(t)
	bin := vmtest.BuildBinary(t, "./cmd/converge-node")
	l.RemoveDomain(t, domName) // a leftover of an interrupted run
	t.Cleanup(func() { l.RemoveDomain(t, domName) })

	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	live, deleting := filepath.Join(dir, "vmi.yaml"), filepath.Join(dir, "vmi-deleting.yaml")
	for path, del := range map[string]bool{live: false, deleting: true} {
		if err := os.WriteFile(path, []byte(vmiYAML(guest, del)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	serialLog := filepath.Join(stateDir, "serial", domName+"-serial.log")

	start := time.Now()
	agent := startAgent(t, bin, live, stateDir, l)
	agent.await(t, namespace+"/"+vmiName+" Running ready=True", 90*time.Second)
	running := time.Since(start)

	conn, err := libvirt.Connect(l.URI)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	console, err := conn.OpenConsole(domName)
	if err != nil {
		t.Fatal(err)
	}
	consoleOut := &safebuffer.Buffer{}
	readDone := make(chan error, 1)
	go func() { _, err := io.Copy(consoleOut, console); readDone <- err }()
	onConsole := waitFor(t, "the marker on the console stream", 120*time.Second, func() bool {
		return strings.Contains(consoleOut.String(), marker)
	}).Sub(start)
	onLog := waitFor(t, "the marker in "+serialLog, 30*time.Second, func() bool {
		b, _ := os.ReadFile(serialLog)
		return bytes.Contains(b, []byte(marker))
	}).Sub(start)
	if err := console.Close(); err != nil {
		t.Errorf("closing the console: %v", err)
	}
	if err := <-readDone; !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("console read after Close: %v, want io.ErrClosedPipe", err)
	}
	first, _, _ := strings.Cut(consoleOut.String()[strings.Index(consoleOut.String(), marker):], "\n")
	t.Logf("console: %q", strings.TrimSpace(first))
	t.Logf("latency: VMI served -> Running/Ready %s; -> marker on console %s; -> marker in serial log (polled) %s",
		running.Round(time.Millisecond), onConsole.Round(time.Millisecond), onLog.Round(time.Millisecond))

	if err := agent.stop(t); err != nil {
		t.Errorf("converge-node vm on SIGTERM: %v; log:\n%s", err, tailFile(agent.stderr))
	}
	if st, err := l.Virsh("domstate", domName); err != nil || strings.TrimSpace(st) != "running" {
		t.Errorf("domain %s after the agent stopped: %q, %v; want it still running", domName, strings.TrimSpace(st), err)
	}

	stopStart := time.Now()
	agent = startAgent(t, bin, deleting, stateDir, l)
	agent.await(t, namespace+"/"+vmiName+" removed", 60*time.Second)
	t.Logf("latency: VMI deleted -> removed (grace 2 s, then destroy and undefine) %s", time.Since(stopStart).Round(time.Millisecond))
	if err := agent.stop(t); err != nil {
		t.Errorf("converge-node vm on SIGTERM: %v", err)
	}
	doms := l.Domains(t)
	for _, d := range doms {
		if d == domName {
			t.Errorf("domain %s still defined after the VMI was removed", domName)
		}
	}
	if l.Started && len(doms) != 0 {
		t.Errorf("virsh list --all on the test's libvirtd: %q, want nothing", doms)
	}
}

// waitFor polls cond every 100 ms and gives the time it became true; it
// fails the test after guard (a hang guard).
func waitFor(t *testing.T, what string, guard time.Duration, cond func() bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, guard)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Now()
}

func tailFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}
