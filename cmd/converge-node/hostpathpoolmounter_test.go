package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/converge-dev/converge/internal/testing/safebuffer"
)

// TestHostpathPoolMounterFlags runs `converge-node hostpath-pool-mounter`
// with bad flags: each fails before anything is mounted or created, with
// an error naming the flag's problem.
func TestHostpathPoolMounterFlags(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "pool", "csi")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no target", nil, `target "": expected an absolute, clean path`},
		{"relative source", []string{"--source", "source", "--target", target}, `source "source": expected an absolute`},
		{"unclean target", []string{"--target", dir + "/../x"}, "expected an absolute, clean path"},
		{"target inside source", []string{"--source", dir, "--target", target}, "one contains the other"},
		{"zero interval", []string{"--target", target, "--interval", "0s"}, "interval 0s: expected a positive duration"},
		{"unknown flag", []string{"--mountPath", target}, "unknown flag: --mountPath"},
		{"argument", []string{"extra"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := execute(context.Background(), io.Discard, append([]string{"hostpath-pool-mounter"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("hostpath-pool-mounter %q: error %v, want one containing %q", tc.args, err, tc.want)
			}
			if matches, _ := filepath.Glob(filepath.Join(dir, "*")); len(matches) != 0 {
				t.Fatalf("hostpath-pool-mounter %q created %v", tc.args, matches)
			}
		})
	}
}

// TestHostpathPoolMounterBinary builds converge-node and runs
// `converge-node hostpath-pool-mounter` as a pool worker's container
// does, in a temp dir standing for the node (a tmpfs for the PVC, a
// shared host path and its Bidirectional mount in the pod): the host sees
// the PVC at <pool path>/csi; on SIGTERM the mounter unmounts it and
// exits 0.
func TestHostpathPoolMounterBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the converge-node binary")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatal("bind mounts need root (CAP_SYS_ADMIN) and CONVERGE_REQUIRE_NODEPLANE=1 is set")
		}
		t.Skip("bind mounts need root (CAP_SYS_ADMIN); set CONVERGE_REQUIRE_NODEPLANE=1 to make this a failure")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "converge-node")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	pvc, host, pod := filepath.Join(dir, "pvc"), filepath.Join(dir, "host"), filepath.Join(dir, "pod")
	for _, d := range []string{pvc, host, pod} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mount := func(source, target, fstype string, flags uintptr) {
		t.Helper()
		if err := unix.Mount(source, target, fstype, flags, ""); err != nil {
			t.Fatalf("mount %s on %s: %v", source, target, err)
		}
		t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
	}
	mount("pvc", pvc, "tmpfs", 0)
	if err := os.WriteFile(filepath.Join(pvc, "on-the-pvc"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mount(host, host, "", unix.MS_BIND)
	if err := unix.Mount("", host, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	mount(host, pod, "", unix.MS_BIND)
	t.Cleanup(func() { _ = unix.Unmount(filepath.Join(pod, "csi"), unix.MNT_DETACH) })

	var logs safebuffer.Buffer
	cmd := exec.Command(bin, "hostpath-pool-mounter", "--source", pvc, "--target", filepath.Join(pod, "csi"), "--interval", "100ms")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	onHost := filepath.Join(host, "csi", "on-the-pvc")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(onHost); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the PVC is not shown at %s within 30s:\n%s", filepath.Dir(onHost), logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v, want 0:\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit 30s after SIGTERM:\n%s", logs.String())
	}
	if _, err := os.Stat(onHost); !os.IsNotExist(err) {
		t.Fatalf("after SIGTERM the host still shows the PVC at %s (%v):\n%s", filepath.Dir(onHost), err, logs.String())
	}
	if !strings.Contains(logs.String(), "unmounted") {
		t.Errorf("logs lack the unmount:\n%s", logs.String())
	}
}
