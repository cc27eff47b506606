//go:build linux

package poolmount

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatal("bind mounts need root (CAP_SYS_ADMIN) and CONVERGE_REQUIRE_NODEPLANE=1 is set")
		}
		t.Skip("bind mounts need root (CAP_SYS_ADMIN); set CONVERGE_REQUIRE_NODEPLANE=1 to make this a failure")
	}
}

// mount mounts and registers a lazy unmount for the end of the test.
func mount(t *testing.T, source, target, fstype string, flags uintptr) {
	t.Helper()
	if err := unix.Mount(source, target, fstype, flags, ""); err != nil {
		t.Fatalf("mount %s on %s: %v", source, target, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
}

// node gives a pod's view of a node in a temp dir: pvc, a tmpfs standing
// for the PVC the kubelet mounted into the container; host, the host's
// pool path (a shared mount, as a node's root is); pod, the same path
// mounted into the container with Bidirectional propagation (a bind of
// host, in its peer group).
func node(t *testing.T) (pvc, host, pod string) {
	t.Helper()
	dir := t.TempDir()
	pvc, host, pod = filepath.Join(dir, "pvc"), filepath.Join(dir, "host"), filepath.Join(dir, "pod")
	for _, d := range []string{pvc, host, pod} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mount(t, "pvc", pvc, "tmpfs", 0)
	if err := os.WriteFile(filepath.Join(pvc, "on-the-pvc"), []byte("pvc"), 0o644); err != nil {
		t.Fatal(err)
	}
	mount(t, host, host, "", unix.MS_BIND)
	if err := unix.Mount("", host, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	mount(t, host, pod, "", unix.MS_BIND)
	return pvc, host, pod
}

// TestBindPropagatesAndUnmounts binds the PVC on <pod>/csi: the host sees
// the PVC's file at <host>/csi through propagation; a second Bind keeps
// the mount; a stale mount of something else there is replaced; Unmount
// removes it on the host too and a second Unmount is a no-op.
func TestBindPropagatesAndUnmounts(t *testing.T) {
	requireRoot(t)
	pvc, host, pod := node(t)
	target := filepath.Join(pod, "csi")
	mounted, err := Bind(pvc, target)
	if err != nil || !mounted {
		t.Fatalf("Bind = %v, %v; want true, nil", mounted, err)
	}
	t.Cleanup(func() { _ = Unmount(target) })
	if b, err := os.ReadFile(filepath.Join(host, "csi", "on-the-pvc")); err != nil || string(b) != "pvc" {
		t.Fatalf("host side <path>/csi/on-the-pvc = %q, %v; want the PVC's file", b, err)
	}
	if err := os.WriteFile(filepath.Join(host, "csi", "volume"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(pvc, "volume")); err != nil {
		t.Fatalf("a file the driver writes at <path>/csi on the host is not on the PVC: %v", err)
	}
	if mounted, err := Bind(pvc, target); err != nil || mounted {
		t.Fatalf("second Bind = %v, %v; want false (kept), nil", mounted, err)
	}
	if at, _ := mountsAt(target); len(at) != 1 {
		t.Fatalf("%d mounts at %s after a second Bind, want 1", len(at), target)
	}

	// A stale mount of something else is replaced.
	if err := Unmount(target); err != nil {
		t.Fatal(err)
	}
	mount(t, "stale", target, "tmpfs", 0)
	if mounted, err := Bind(pvc, target); err != nil || !mounted {
		t.Fatalf("Bind over a stale mount = %v, %v; want true, nil", mounted, err)
	}
	if at, _ := mountsAt(target); len(at) != 1 {
		t.Fatalf("%d mounts at %s after replacing a stale one, want 1", len(at), target)
	}
	if shows, _, err := Shows(pvc, target); err != nil || !shows {
		t.Fatalf("Shows = %v, %v after replacing a stale mount", shows, err)
	}

	if err := Unmount(target); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(host, "csi", "on-the-pvc")); !os.IsNotExist(err) {
		t.Fatalf("after Unmount the host still shows the PVC at <path>/csi: %v", err)
	}
	if err := Unmount(target); err != nil {
		t.Fatalf("second Unmount: %v", err)
	}
}

// TestBindRefusesUnmountedSource: a source that is not a mount point (the
// kubelet did not mount the PVC) or not a directory is refused, naming it,
// and nothing is mounted.
func TestBindRefusesUnmountedSource(t *testing.T) {
	requireRoot(t)
	_, _, pod := node(t)
	dir := t.TempDir()
	for _, tc := range []struct{ name, source, want string }{
		{"not a mount point", dir, "is not a mount point"},
		{"missing", filepath.Join(dir, "missing"), "is not a mount point"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(pod, "csi")
			_, err := Bind(tc.source, target)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.source) {
				t.Fatalf("Bind(%s) = %v, want an error naming it containing %q", tc.source, err, tc.want)
			}
			if at, _ := mountsAt(target); len(at) != 0 {
				t.Fatalf("Bind(%s) mounted %v", tc.source, at)
			}
		})
	}
}

// TestKeep runs Keep: the mount appears, is bound again after someone
// unmounts it, and is gone once the context ends, which gives nil.
func TestKeep(t *testing.T) {
	requireRoot(t)
	pvc, host, pod := node(t)
	o := Options{Source: pvc, Target: filepath.Join(pod, "csi"), Interval: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Keep(ctx, o, t.Logf) }()
	onHost := filepath.Join(host, "csi", "on-the-pvc")
	eventually(t, func() bool { _, err := os.Stat(onHost); return err == nil }, "the PVC shown at <host>/csi")
	if err := unix.Unmount(o.Target, 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { _, err := os.Stat(onHost); return err == nil }, "the PVC bound again after an unmount")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Keep = %v at the end of its context, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Keep did not return 10s after its context ended")
	}
	if at, _ := mountsAt(o.Target); len(at) != 0 {
		t.Fatalf("%s still mounted after Keep returned: %v", o.Target, at)
	}
}

func eventually(t *testing.T, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestValidate checks the options Keep refuses, each error naming the
// option.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"ok", Options{Source: "/source", Target: "/var/hpp/csi", Interval: time.Second}, ""},
		{"relative source", Options{Source: "source", Target: "/var/hpp/csi", Interval: time.Second}, `source "source": expected an absolute`},
		{"unclean target", Options{Source: "/source", Target: "/var/../csi", Interval: time.Second}, `target "/var/../csi"`},
		{"root target", Options{Source: "/source", Target: "/", Interval: time.Second}, `target "/"`},
		{"nested", Options{Source: "/var/hpp", Target: "/var/hpp/csi", Interval: time.Second}, "one contains the other"},
		{"same", Options{Source: "/x", Target: "/x", Interval: time.Second}, "one contains the other"},
		{"no interval", Options{Source: "/source", Target: "/var/hpp/csi"}, "interval 0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestParseMountInfo reads mount points with escaped characters.
func TestParseMountInfo(t *testing.T) {
	in := "61 27 0:59 / /tmp/a\\040b rw,relatime shared:26 - tmpfs tmp rw\n72 27 0:59 /sub /var/hpp/csi rw - tmpfs tmp rw\n"
	got, err := parseMountInfo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []mountPoint{{root: "/", path: "/tmp/a b"}, {root: "/sub", path: "/var/hpp/csi"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("parseMountInfo = %v, want %v", got, want)
	}
	if _, err := parseMountInfo(strings.NewReader("bad line\n")); err == nil {
		t.Fatal("a malformed line gave no error")
	}
}
