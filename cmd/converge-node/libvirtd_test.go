package main

import (
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
	ready := regexp.MustCompile(`msg=ready .*uri="(qemu:///system\?socket=[^"]+)" virtlogd=(\d+) libvirtd=(\d+)`)

	run := func(t *testing.T) (*exec.Cmd, *safebuffer.Buffer, <-chan error, [2]int) {
		dir := t.TempDir()
		var out safebuffer.Buffer
		cmd := exec.Command(bin, "libvirtd", "--run-dir", filepath.Join(dir, "run"), "--socket-dir", filepath.Join(dir, "sock"),
			"--state-dir", filepath.Join(dir, "state"), "--log-dir", filepath.Join(dir, "log"))
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
