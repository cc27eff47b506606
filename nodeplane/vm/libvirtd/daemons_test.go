package libvirtd_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/converge-dev/converge/internal/testing/safebuffer"
	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
	"github.com/converge-dev/converge/nodeplane/vm/libvirt"
	"github.com/converge-dev/converge/nodeplane/vm/libvirtd"
)

// testOptions gives options whose every directory is the test's.
func testOptions(t *testing.T) (libvirtd.Options, string) {
	t.Helper()
	vmtest.Require(t, os.Geteuid() == 0, "libvirtd runs as root")
	o := libvirtd.DefaultOptions()
	dir := t.TempDir()
	o.RunDir, o.SocketDir = filepath.Join(dir, "run"), filepath.Join(dir, "sock")
	o.StateDir, o.LogDir = filepath.Join(dir, "state"), filepath.Join(dir, "log")
	err := libvirtd.Check(o)
	vmtest.Require(t, err == nil, "%v", err)
	return o, dir
}

// connect opens the agent's libvirt connection to uri, retrying while
// libvirtd is between bind and listen.
func connect(t *testing.T, uri string) *libvirt.Conn {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		conn, err := libvirt.Connect(uri)
		if err == nil {
			t.Cleanup(func() { conn.Close() })
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("connecting to %s: %v", uri, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDaemonsRunAGuest starts virtlogd and libvirtd with directories of
// the test's own, connects with the VM agent's libvirt package on the
// socket, checks there is no network (no default network), defines and
// starts a TCG domain booting the hack/guest kernel, reads its marker
// from the serial log virtlogd writes, destroys and undefines it, then
// stops the daemons: both processes are gone, their sockets and pid files
// removed, and nothing of their mount namespace is visible here.
func TestDaemonsRunAGuest(t *testing.T) {
	o, dir := testOptions(t)
	guest := vmtest.BuildGuest(t)
	var out safebuffer.Buffer
	o.Output = &out
	start := time.Now()
	d, err := libvirtd.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("Start: %v\n%s", err, out.String())
	}
	defer func() {
		if t.Failed() {
			t.Logf("daemons' output:\n%s", out.String())
		}
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = d.Stop()
		}
	})
	vl, lv := d.Pids()
	conn := connect(t, d.URI())
	t.Logf("libvirtd on %s answers %s after Start", d.URI(), time.Since(start).Round(time.Millisecond))
	if nets, err := exec.Command("virsh", "-c", d.URI(), "net-list", "--all", "--name").Output(); err != nil {
		t.Errorf("virsh net-list: %v", err)
	} else if s := strings.TrimSpace(string(nets)); s != "" {
		t.Errorf("networks defined: %q, want none (no default network)", s)
	}

	name := "converge-libvirtd-test"
	serial := filepath.Join(dir, "serial.log")
	xml, err := (&libvirtxml.Domain{
		Type: "qemu", Name: name,
		Memory: &libvirtxml.DomainMemory{Value: 128, Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: 1},
		OS: &libvirtxml.DomainOS{
			Type:    &libvirtxml.DomainOSType{Arch: "x86_64", Machine: "q35", Type: "hvm"},
			Kernel:  filepath.Join(guest, "vmlinuz"),
			Initrd:  filepath.Join(guest, "initrd.gz"),
			Cmdline: "console=ttyS0 panic=-1 quiet converge.name=" + name,
		},
		OnPoweroff: "destroy", OnReboot: "destroy", OnCrash: "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Emulator: "/usr/bin/qemu-system-x86_64",
			Serials: []libvirtxml.DomainSerial{{
				Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
				Target: &libvirtxml.DomainSerialTarget{Port: new(uint)},
				Log:    &libvirtxml.DomainChardevLog{File: serial, Append: "off"},
			}},
			MemBalloon: &libvirtxml.DomainMemBalloon{Model: "none"},
		},
	}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Define(xml); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Destroy(name); _ = conn.Undefine(name) })
	created := time.Now()
	if err := conn.Start(name); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(serial)
		if strings.Contains(string(b), "CONVERGE-GUEST-OK") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CONVERGE-GUEST-OK in %s after 2 min:\n%s", serial, b)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("guest marker in the serial log %s after Start", time.Since(created).Round(time.Millisecond))
	pidFile := filepath.Join(o.SocketDir, "qemu", name+".pid") // libvirt's /run/libvirt/qemu
	qemuPid := readPid(t, pidFile)
	if err := conn.Destroy(name); err != nil {
		t.Fatal(err)
	}
	if err := conn.Undefine(name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Lookup(name); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("Lookup after Undefine: %v, want ErrNotFound", err)
	}
	waitGone(t, "qemu", qemuPid)

	stopStart := time.Now()
	if err := d.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stopped = true
	t.Logf("Stop took %s", time.Since(stopStart).Round(time.Millisecond))
	if d.Err() == nil {
		t.Error("Err after Stop: nil, want the daemon that exited first")
	}
	waitGone(t, "virtlogd", vl)
	waitGone(t, "libvirtd", lv)
	for _, f := range []string{"libvirt-sock", "libvirt-sock-ro", "libvirt-admin-sock", "virtlogd-sock", "virtlogd-admin-sock"} {
		if _, err := os.Lstat(filepath.Join(o.SocketDir, f)); err == nil {
			t.Errorf("%s left in %s", f, o.SocketDir)
		}
	}
	for _, f := range []string{"libvirtd.pid", "virtlogd.pid"} {
		if _, err := os.Lstat(filepath.Join(o.RunDir, f)); err == nil {
			t.Errorf("%s left in %s", f, o.RunDir)
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), dir) {
		t.Errorf("the daemons' bind mounts leaked into the test's mount namespace:\n%s", mounts)
	}
}

// TestRunExitsWhenADaemonDies runs the supervisor, kills virtlogd with
// SIGKILL and checks that Run stops libvirtd and returns an error naming
// virtlogd (converge-node libvirtd then exits non-zero).
func TestRunExitsWhenADaemonDies(t *testing.T) {
	o, _ := testOptions(t)
	var out safebuffer.Buffer
	o.Output = &out
	ready := make(chan *libvirtd.Daemons, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- libvirtd.Run(ctx, o, func(d *libvirtd.Daemons) { ready <- d }) }()
	var d *libvirtd.Daemons
	select {
	case d = <-ready:
	case err := <-res:
		t.Fatalf("Run: %v\n%s", err, out.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("Run not ready after 2 min\n%s", out.String())
	}
	vl, lv := d.Pids()
	if err := syscall.Kill(vl, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if err == nil || !strings.Contains(err.Error(), "virtlogd exited: signal: killed") {
			t.Fatalf("Run: %v, want an error saying virtlogd was killed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within 1 min of virtlogd's death")
	}
	waitGone(t, "libvirtd", lv)
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("qemu pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("qemu pid file %s: %q", path, b)
	}
	return pid
}

// waitGone waits until pid no longer runs: it does not exist, or is a
// zombie (only its parent can reap it, which for a daemonized QEMU is not
// this test).
func waitGone(t *testing.T, name string, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs 30 s later: %s", name, pid, stat)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
