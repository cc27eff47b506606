package libvirtd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBinds checks the bind mounts that make libvirt's directories the
// options': only those that differ are mounted over, /etc/libvirt is
// always <state>/etc with converge's qemu.conf over its qemu.conf, and
// /var/run/libvirt counts as /run/libvirt.
func TestBinds(t *testing.T) {
	custom := Options{RunDir: "/x/run", SocketDir: "/x/sock", StateDir: "/x/state", LogDir: "/x/log"}
	for _, tc := range []struct {
		name string
		o    Options
		want []bind
	}{
		{"defaults", DefaultOptions(), []bind{
			{Source: "/var/lib/libvirt/etc", Target: "/etc/libvirt"},
			{Source: "/run/converge-node/libvirtd/qemu.conf", Target: "/etc/libvirt/qemu.conf", File: true},
		}},
		{"own directories", custom, []bind{
			{Source: "/x/sock", Target: "/run/libvirt"},
			{Source: "/x/state", Target: "/var/lib/libvirt"},
			{Source: "/x/state/etc", Target: "/etc/libvirt"},
			{Source: "/x/run/qemu.conf", Target: "/etc/libvirt/qemu.conf", File: true},
			{Source: "/x/log", Target: "/var/log/libvirt"},
		}},
		{"socket directory /run/libvirt", Options{RunDir: "/x/run", SocketDir: "/run/libvirt", StateDir: "/x/state", LogDir: "/var/log/libvirt"}, []bind{
			{Source: "/x/state", Target: "/var/lib/libvirt"},
			{Source: "/x/state/etc", Target: "/etc/libvirt"},
			{Source: "/x/run/qemu.conf", Target: "/etc/libvirt/qemu.conf", File: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := binds(tc.o); !slices.Equal(got, tc.want) {
				t.Errorf("binds:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestURI checks that a socket directory other than libvirt's own is
// named in the URI.
func TestURI(t *testing.T) {
	for dir, want := range map[string]string{
		"/var/run/libvirt": "qemu:///system",
		"/run/libvirt":     "qemu:///system",
		"/tmp/x/sock":      "qemu:///system?socket=/tmp/x/sock/libvirt-sock",
	} {
		o := DefaultOptions()
		o.SocketDir = dir
		if got := o.URI(); got != want {
			t.Errorf("SocketDir %s: URI %q, want %q", dir, got, want)
		}
	}
}

// TestValidate checks that bad options are refused with the field named.
func TestValidate(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("DefaultOptions: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"relative run dir", func(o *Options) { o.RunDir = "run" }, `run directory "run": expected an absolute, clean path`},
		{"unclean socket dir", func(o *Options) { o.SocketDir = "/var/run/../libvirt" }, `socket directory "/var/run/../libvirt"`},
		{"root state dir", func(o *Options) { o.StateDir = "/" }, `state directory "/"`},
		{"empty log dir", func(o *Options) { o.LogDir = "" }, `log directory ""`},
		{"same dirs", func(o *Options) { o.LogDir = o.StateDir }, "state directory and log directory are both /var/lib/libvirt"},
		{"no libvirtd", func(o *Options) { o.Libvirtd = "" }, "libvirtd and virtlogd binaries: required"},
		{"no timeout", func(o *Options) { o.StopTimeout = 0 }, "expected positive durations"},
		{"relative netns", func(o *Options) { o.Netns = "ns1" }, `network namespace "ns1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.edit(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestConfig checks the settings converge relies on in each file.
func TestConfig(t *testing.T) {
	o := DefaultOptions()
	o.SocketDir = "/x/sock"
	c := Config(o)
	for file, lines := range map[string][]string{
		"libvirtd.conf": {`listen_tcp = 0`, `listen_tls = 0`, `unix_sock_dir = "/x/sock"`, `unix_sock_rw_perms = "0700"`, `auth_unix_rw = "none"`, `log_outputs = "3:stderr"`},
		"virtlogd.conf": {`log_outputs = "3:stderr"`},
		"qemu.conf":     {`user = "root"`, `group = "root"`, `dynamic_ownership = 0`, `security_driver = "none"`, `stdio_handler = "logd"`, `cgroup_controllers = [ ]`},
	} {
		have := strings.Split(c[file], "\n")
		for _, l := range lines {
			if !slices.Contains(have, l) {
				t.Errorf("%s has no line %q:\n%s", file, l, c[file])
			}
		}
	}
	if len(c) != 3 {
		t.Errorf("Config gives %d files, want 3", len(c))
	}
}

// TestLineWriter checks that output is forwarded line by line, prefixed,
// with blank lines dropped and a last partial line flushed.
func TestLineWriter(t *testing.T) {
	var out bytes.Buffer
	w := newLineWriter(&out, "libvirtd: ")
	for _, chunk := range []string{"one\ntw", "o\n\n  \nthr", "ee"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := out.String(), "libvirtd: one\nlibvirtd: two\n"; got != want {
		t.Fatalf("before Flush: %q, want %q", got, want)
	}
	w.Flush()
	if got, want := out.String(), "libvirtd: one\nlibvirtd: two\nlibvirtd: three\n"; got != want {
		t.Fatalf("after Flush: %q, want %q", got, want)
	}
}

// TestParseStat reads state and parent from /proc/<pid>/stat lines,
// including a command name with spaces and parentheses.
func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		line  string
		state byte
		ppid  int
		ok    bool
	}{
		{"4242 (qemu-system-x86) Z 1 4242 4242 0 -1", 'Z', 1, true},
		{"17 (a (b) c) S 9 17 17", 'S', 9, true},
		{"17 (x) R", 0, 0, false},
		{"garbage", 0, 0, false},
	} {
		state, ppid, ok := parseStat([]byte(tc.line))
		if state != tc.state || ppid != tc.ppid || ok != tc.ok {
			t.Errorf("parseStat(%q) = %q %d %v, want %q %d %v", tc.line, state, ppid, ok, tc.state, tc.ppid, tc.ok)
		}
	}
}

// TestReaper makes this process a child subreaper, starts a shell that
// leaves an orphan (re-parented here, as QEMU is to the supervisor) which
// then exits, and checks that the reaper waits for the zombie while a
// kept child stays for its own Wait.
func TestReaper(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	r := startReaper()
	defer r.stop()
	kept := exec.Command("sh", "-c", "exit 7")
	if err := r.startKept(func() (int, error) { err := kept.Start(); return kept.Process.Pid, err }); err != nil {
		t.Fatal(err)
	}
	// The shell prints the background sleep's PID and exits; the sleep is
	// re-parented to this process and exits 0.3 s later.
	var out bytes.Buffer
	sh := exec.Command("sh", "-c", "sleep 0.3 & echo $!")
	sh.Stdout = &out
	if err := r.startKept(func() (int, error) { err := sh.Start(); return sh.Process.Pid, err }); err != nil {
		t.Fatal(err)
	}
	if err := sh.Wait(); err != nil {
		t.Fatal(err)
	}
	orphan := strings.TrimSpace(out.String())
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join("/proc", orphan)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			stat, _ := os.ReadFile(filepath.Join("/proc", orphan, "stat"))
			t.Fatalf("orphan %s not reaped after 15 s: %s", orphan, stat)
		}
		time.Sleep(20 * time.Millisecond)
	}
	err := kept.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("kept child's Wait: %v, want exit status 7 (the reaper must leave it)", err)
	}
}

// TestOnOwnThread checks that f runs on a thread other than the main one
// (whose namespaces /proc/self shows), so its namespace changes stay its
// own.
func TestOnOwnThread(t *testing.T) {
	for range 200 {
		tid := make(chan int, 1)
		onOwnThread(func() { tid <- unix.Gettid() })
		if got := <-tid; got == unix.Getpid() {
			t.Fatalf("f ran on the main thread (tid %d)", got)
		}
	}
}
