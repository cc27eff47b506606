package vmtest

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

	"github.com/converge-dev/converge/nodeplane/vm/libvirtd"
)

// Libvirt is a libvirtd (with its virtlogd) run for one test by the
// product's supervisor (nodeplane/vm/libvirtd, what `converge-node
// libvirtd` runs in the VM agent's DaemonSet), with directories of its
// own: it never touches the host's /run/libvirt, /etc/libvirt or
// /var/lib/libvirt, so it runs beside any other libvirtd.
type Libvirt struct {
	// URI is the daemon's libvirt URI: qemu:///system with
	// ?socket=<the test's socket directory>/libvirt-sock.
	URI string
	// Netns is the network namespace libvirtd (and so every QEMU and tap
	// it creates) runs in.
	Netns string
	// Dir holds the daemons' output (daemons.log) and their directories.
	Dir string
	// Started is true: the daemon is always the test's own (a daemon
	// already running on the host is neither used nor disturbed).
	Started bool

	opts    libvirtd.Options
	daemons *libvirtd.Daemons
}

// lockPath serialises the end-to-end tests of every test process on this
// host: each boots TCG guests, and two at once on 2 cores make both slow
// enough to time out.
const lockPath = "/run/converge-e2e.lock"

// lockHost takes an exclusive flock on lockPath, released when t's
// cleanups have run (the lock goes with the process if it dies).
func lockHost(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("%s: %v", lockPath, err)
	}
	start := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("%s: flock: %v", lockPath, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("waited %s for %s (another end-to-end test held it)", d.Round(time.Millisecond), lockPath)
	}
	t.Cleanup(func() { f.Close() })
}

// StartLibvirt checks the setup (root, virsh, ip, qemu-system-x86_64,
// and what libvirtd.Check requires: the daemons and the libvirt-qemu
// user), creates a network namespace for the test, starts virtlogd and
// libvirtd there with libvirtd.Start (converge's configuration, the
// test's own directories) and waits until URI answers (about 8 s while
// libvirt's QEMU capability cache is empty, under 1 s after). Both are
// stopped in t.Cleanup, after the cleanups registered later (so a test's
// domain cleanup runs first), and the namespace is deleted. It holds the
// host lock (lockPath) for the rest of t, so concurrent test processes
// take their turns.
func StartLibvirt(t *testing.T) *Libvirt {
	t.Helper()
	Require(t, os.Geteuid() == 0, "the libvirt end-to-end tests run as root (libvirtd, network namespaces)")
	for _, bin := range []string{"virsh", "qemu-system-x86_64", "ip"} {
		_, err := exec.LookPath(bin)
		Require(t, err == nil, "%s not found: apt-get install -y --no-install-recommends libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 qemu-utils iproute2", bin)
	}
	lockHost(t)
	dir := t.TempDir()
	o := libvirtd.DefaultOptions()
	o.RunDir, o.SocketDir = filepath.Join(dir, "run"), filepath.Join(dir, "sock")
	o.StateDir, o.LogDir = filepath.Join(dir, "state"), filepath.Join(dir, "log")
	err := libvirtd.Check(o)
	Require(t, err == nil, "%v", err)
	l := &Libvirt{URI: o.URI(), Dir: dir, Started: true}
	l.Netns = fmt.Sprintf("converge-e2e-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", l.Netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", l.Netns, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", l.Netns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", l.Netns, err, out)
		}
	})
	o.Netns = filepath.Join("/run/netns", l.Netns)
	l.opts = o
	start := time.Now()
	l.start(t)
	t.Logf("libvirtd: %s answers after %s (netns %s)", l.URI, time.Since(start).Round(time.Millisecond), l.Netns)
	return l
}

// start runs the daemons, stopped in t.Cleanup, and waits until URI
// answers virsh.
func (l *Libvirt) start(t *testing.T) {
	t.Helper()
	logPath := filepath.Join(l.Dir, "daemons.log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	o := l.opts
	o.Output = log
	d, err := libvirtd.Start(context.Background(), o)
	if err != nil {
		log.Close()
		t.Fatalf("starting libvirtd: %v; %s:\n%s", err, logPath, tail(logPath))
	}
	l.daemons = d
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("stopping libvirtd: %v", err)
		}
		log.Close()
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, err := l.Virsh("version"); err == nil {
			return
		}
		select {
		case <-d.Died():
			t.Fatalf("%v while starting; %s:\n%s", d.Err(), logPath, tail(logPath))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("libvirtd: %s did not answer within 90 s; %s:\n%s", l.URI, logPath, tail(logPath))
		}
	}
}

// Virsh runs virsh against l.URI and gives its standard output; the error
// carries the command and its standard error.
func (l *Libvirt) Virsh(args ...string) (string, error) {
	cmd := exec.Command("virsh", append([]string{"-c", l.URI}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Domains gives the names of every domain, running or not.
func (l *Libvirt) Domains(t testing.TB) []string {
	t.Helper()
	out, err := l.Virsh("list", "--all", "--name")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

// RemoveDomain destroys and undefines the domain name if it exists, for
// leftovers of an earlier run and for t.Cleanup; errors are the test's.
func (l *Libvirt) RemoveDomain(t testing.TB, name string) {
	t.Helper()
	out, err := l.Virsh("domstate", name)
	if err != nil {
		return // no such domain
	}
	if strings.TrimSpace(out) != "shut off" {
		if _, err := l.Virsh("destroy", name); err != nil {
			t.Errorf("removing domain %s: %v", name, err)
		}
	}
	if _, err := l.Virsh("undefine", name, "--nvram"); err != nil {
		t.Errorf("removing domain %s: %v", name, err)
	}
}

// tail gives the last 4 KiB of a file, for failure messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}
