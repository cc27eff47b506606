package vmtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// libvirtdPidFile is where the privileged libvirtd writes its PID.
const libvirtdPidFile = "/run/libvirtd.pid"

// RestartLibvirtd stops the libvirtd StartLibvirt started (SIGTERM to the
// PID in /run/libvirtd.pid, then waits for it to exit) and starts a new
// one in the same network namespace, stopped in t.Cleanup like the
// first, and waits until SystemURI answers again. Running domains
// survive: QEMU outlives libvirtd, which re-attaches to it on start. It
// gives how long the daemon was away. It skips (or fails, see Require)
// when the daemon was not started by the test.
func (l *Libvirt) RestartLibvirtd(t *testing.T) time.Duration {
	t.Helper()
	Require(t, l.Started, "libvirtd was already running before the test: not restarting a daemon the test does not own")
	b, err := os.ReadFile(libvirtdPidFile)
	if err != nil {
		t.Fatalf("libvirtd: reading %s: %v", libvirtdPidFile, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("libvirtd: %s holds %q, expected a PID", libvirtdPidFile, b)
	}
	if comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); strings.TrimSpace(string(comm)) != "libvirtd" {
		t.Fatalf("libvirtd: %s names PID %d, which is %q, not libvirtd", libvirtdPidFile, pid, strings.TrimSpace(string(comm)))
	}
	start := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("libvirtd: SIGTERM to %d: %v", pid, err)
	}
	for {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); os.IsNotExist(err) {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("libvirtd (pid %d) still running 30 s after SIGTERM", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	daemon := startDaemon(t, l.Dir, "ip", "netns", "exec", l.Netns, "libvirtd")
	for {
		if _, err := l.Virsh("version"); err == nil {
			break
		}
		select {
		case <-daemon:
			t.Fatalf("restarted libvirtd exited while starting; log:\n%s", tail(filepath.Join(l.Dir, "libvirtd.log")))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("restarted libvirtd: %s did not answer within 90 s; log:\n%s", SystemURI, tail(filepath.Join(l.Dir, "libvirtd.log")))
		}
	}
	return time.Since(start)
}
