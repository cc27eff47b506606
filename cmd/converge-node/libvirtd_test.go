package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/testing/safebuffer"
	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/vm/libvirtd"
)

// TestLibvirtdCommand runs the built `converge-node libvirtd` as the
// libvirtd container does: it prints ready with the URI and both PIDs;
// SIGTERM stops both daemons and exits 0; in a second run, libvirtd
// killed from outside makes the command stop virtlogd and exit 1 naming
// libvirtd, so that the kubelet restarts the container.
func TestLibvirtdCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the converge-node binary and runs libvirtd")
	}
	vmtest.Require(t, os.Geteuid() == 0, "converge-node libvirtd runs as root")
	err := libvirtd.Check(libvirtd.DefaultOptions())
	vmtest.Require(t, err == nil, "%v", err)
	bin := vmtest.BuildBinary(t, "./cmd/converge-node")
	var uri string
	ready := regexp.MustCompile(`msg=ready .*uri="(qemu:///system\?socket=[^"]+)" virtlogd=(\d+) libvirtd=(\d+)`)

	run := func(t *testing.T, wrapper ...string) (*exec.Cmd, *safebuffer.Buffer, <-chan error, [2]int) {
		dir := t.TempDir()
		var out safebuffer.Buffer
		argv := append(wrapper, bin, "libvirtd", "--run-dir", filepath.Join(dir, "run"), "--socket-dir", filepath.Join(dir, "sock"),
			"--state-dir", filepath.Join(dir, "state"), "--log-dir", filepath.Join(dir, "log"))
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				<-exited
			}
		})
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if m := ready.FindStringSubmatch(out.String()); m != nil {
				if want := "qemu:///system?socket=" + filepath.Join(dir, "sock", "libvirt-sock"); m[1] != want {
					t.Errorf("ready with URI %s, want %s", m[1], want)
				}
				vl, _ := strconv.Atoi(m[2])
				lv, _ := strconv.Atoi(m[3])
				uri = m[1]
				return cmd, &out, exited, [2]int{vl, lv}
			}
			select {
			case err := <-exited:
				t.Fatalf("converge-node libvirtd exited before ready: %v\n%s", err, out.String())
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("converge-node libvirtd not ready after 2 min:\n%s", out.String())
			}
		}
	}
	gone := func(t *testing.T, pid int) {
		t.Helper()
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("pid %d still exists", pid)
		}
	}

	t.Run("SIGTERM", func(t *testing.T) {
		cmd, out, exited, pids := run(t)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := <-exited; err != nil {
			t.Fatalf("exit after SIGTERM: %v, want status 0\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "msg=stopped") {
			t.Errorf("no stopped line:\n%s", out.String())
		}
		gone(t, pids[0])
		gone(t, pids[1])
	})
	// In a container the supervisor is PID 1 and every daemonized QEMU
	// becomes its child: a destroyed domain's QEMU must be reaped, not
	// left a zombie libvirt still sees alive.
	t.Run("as PID 1", func(t *testing.T) {
		for _, tool := range []string{"unshare", "virsh"} {
			_, err := exec.LookPath(tool)
			vmtest.Require(t, err == nil, "%s not found: apt-get install -y util-linux libvirt-clients", tool)
		}
		cmd, out, exited, _ := run(t, "unshare", "--pid", "--fork", "--mount-proc")
		// unshare forwards no signal: stop the supervisor, its child, itself
		kids, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "task", strconv.Itoa(cmd.Process.Pid), "children"))
		if err != nil || len(strings.Fields(string(kids))) != 1 {
			t.Fatalf("the supervisor under unshare: children %q, %v", kids, err)
		}
		supervisor, _ := strconv.Atoi(strings.Fields(string(kids))[0])
		stopped := false
		t.Cleanup(func() {
			if !stopped {
				_ = syscall.Kill(supervisor, syscall.SIGTERM)
				<-exited
			}
		})
		xml := filepath.Join(t.TempDir(), "dom.xml")
		os.WriteFile(xml, []byte(`<domain type="qemu"><name>converge-pid1-test</name><memory unit="MiB">64</memory><vcpu>1</vcpu>
<os><type arch="x86_64" machine="q35">hvm</type></os><devices><emulator>/usr/bin/qemu-system-x86_64</emulator><memballoon model="none"/></devices></domain>`), 0o644)
		virsh := func(args ...string) string {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := exec.CommandContext(ctx, "virsh", append([]string{"-c", uri}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("virsh %v: %v\n%s\n%s", args, err, b, out.String())
			}
			return string(b)
		}
		virsh("create", xml)
		pgrep, err := exec.Command("pgrep", "-f", "guest=converge-pid1-test").Output()
		if err != nil {
			t.Fatalf("no QEMU process for the domain: %v", err)
		}
		qemu := strings.Fields(string(pgrep))[0]
		virsh("destroy", "converge-pid1-test")
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, err := os.ReadFile(filepath.Join("/proc", qemu, "stat"))
			if err != nil {
				break // reaped
			}
			if time.Now().After(deadline) {
				t.Fatalf("QEMU %s not reaped 30 s after destroy: %s", qemu, st)
			}
			time.Sleep(50 * time.Millisecond)
		}
		stopped = true
		if err := syscall.Kill(supervisor, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := <-exited; err != nil {
			t.Errorf("after SIGTERM: %v\n%s", err, out.String())
		}
	})
	t.Run("libvirtd dies", func(t *testing.T) {
		_, out, exited, pids := run(t)
		if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out.String(), "error: libvirtd: libvirtd exited: signal: killed") {
				t.Fatalf("exit after libvirtd's death: %v, want status 1 with the error naming libvirtd\n%s", err, out.String())
			}
		case <-time.After(time.Minute):
			t.Fatalf("converge-node libvirtd still runs 1 min after libvirtd died\n%s", out.String())
		}
		gone(t, pids[0])
	})
}
