package vmtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SystemURI is the libvirt URI of the system daemon StartLibvirt runs.
const SystemURI = "qemu:///system"

// virtlogdSocket is where libvirtd looks for virtlogd in privileged mode.
const virtlogdSocket = "/run/libvirt/virtlogd-sock"

// qemuConf must make QEMU run as root, so that it reads kernels and writes
// logs anywhere without libvirt relabelling (chown-ing) the test's files.
const qemuConf = "/etc/libvirt/qemu.conf"

var rootUser = regexp.MustCompile(`(?m)^\s*user\s*=\s*"root"`)

// Libvirt is a libvirtd (with its virtlogd) serving SystemURI for a test.
type Libvirt struct {
	// URI is SystemURI.
	URI string
	// Netns is the network namespace libvirtd (and so every QEMU and tap
	// it creates) runs in; empty when an already running daemon is used.
	Netns string
	// Dir holds the daemons' logs.
	Dir string
	// Started is false when a daemon already answered and was reused (it
	// is then left running).
	Started bool
}

// lockPath serialises the end-to-end tests of every test process on this
// host: they share qemu:///system, so two at once would reuse, restart or
// stop each other's libvirtd.
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

// StartLibvirt checks the setup (root, the libvirt and QEMU binaries, the
// libvirt-qemu user, user = "root" in /etc/libvirt/qemu.conf), then starts
// virtlogd and, inside a new network namespace, libvirtd, and waits until
// SystemURI answers (about 8 s while libvirt's QEMU capability cache is
// empty, under 1 s after). Both are stopped by PID in t.Cleanup, after the
// cleanups registered later (so a test's domain cleanup runs first). A
// daemon that already answers is reused and left alone. It holds the host
// lock (lockPath) for the rest of t, so concurrent test processes take
// their turns.
func StartLibvirt(t *testing.T) *Libvirt {
	t.Helper()
	Require(t, os.Geteuid() == 0, "the libvirt end-to-end tests run as root (libvirtd, network namespaces)")
	for _, bin := range []string{"libvirtd", "virtlogd", "virsh", "qemu-system-x86_64", "ip"} {
		_, err := exec.LookPath(bin)
		Require(t, err == nil, "%s not found: apt-get install -y --no-install-recommends libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 qemu-utils iproute2", bin)
	}
	_, err := user.Lookup("libvirt-qemu")
	Require(t, err == nil, "user libvirt-qemu missing (libvirtd refuses to start): groupadd -r libvirt-qemu && useradd -r -g libvirt-qemu -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu")
	conf, err := os.ReadFile(qemuConf)
	Require(t, err == nil && rootUser.Match(conf), "%s must say user = \"root\" and group = \"root\": printf 'user = \"root\"\\ngroup = \"root\"\\n' > %s", qemuConf, qemuConf)

	lockHost(t)
	l := &Libvirt{URI: SystemURI, Dir: t.TempDir()}
	if _, err := l.Virsh("version"); err == nil {
		t.Logf("libvirtd: %s already answers; using it and leaving it running", SystemURI)
		return l
	}
	l.Started = true
	if !answers(virtlogdSocket) {
		startDaemon(t, l.Dir, "virtlogd")
	}
	l.Netns = fmt.Sprintf("converge-e2e-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", l.Netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", l.Netns, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", l.Netns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", l.Netns, err, out)
		}
	})
	daemon := startDaemon(t, l.Dir, "ip", "netns", "exec", l.Netns, "libvirtd")
	start := time.Now()
	for {
		if _, err := l.Virsh("version"); err == nil {
			break
		}
		select {
		case <-daemon:
			t.Fatalf("libvirtd exited while starting; %s:\n%s", filepath.Join(l.Dir, "libvirtd.log"), tail(filepath.Join(l.Dir, "libvirtd.log")))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("libvirtd: %s did not answer within 90 s; log:\n%s", SystemURI, tail(filepath.Join(l.Dir, "libvirtd.log")))
		}
	}
	t.Logf("libvirtd: %s answers after %s (netns %s)", SystemURI, time.Since(start).Round(time.Millisecond), l.Netns)
	return l
}

// startDaemon runs argv in the foreground of a child process logging to
// dir/<name>.log, where name is argv's last word, and stops it in
// t.Cleanup: SIGTERM, then SIGKILL after 15 s. The channel is closed when
// the process exits.
func startDaemon(t *testing.T, dir string, argv ...string) <-chan struct{} {
	t.Helper()
	name := argv[len(argv)-1]
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", strings.Join(argv, " "), err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = log.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			t.Errorf("%s (pid %d) ignored SIGTERM for 15 s; killing it", name, cmd.Process.Pid)
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return exited
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
	if _, err := l.Virsh("domstate", name); err != nil {
		return // no such domain
	}
	if out, err := l.Virsh("domstate", name); err == nil && strings.TrimSpace(out) != "shut off" {
		if _, err := l.Virsh("destroy", name); err != nil {
			t.Errorf("removing domain %s: %v", name, err)
		}
	}
	if _, err := l.Virsh("undefine", name, "--nvram"); err != nil {
		t.Errorf("removing domain %s: %v", name, err)
	}
}

// answers reports whether a unix socket accepts connections.
func answers(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
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
