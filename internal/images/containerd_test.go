package images_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/images"
	"github.com/converge-dev/converge/internal/testing/vmtest"
)

// containerdConfig is a containerd 1.6 configuration of its own root,
// state and sockets, without the CRI plugin (no kubelet talks to it).
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = ""
[metrics]
  address = ""
`

// startContainerd starts a containerd of its own (root, state, socket
// under a temporary directory) and gives its socket; it is stopped, by
// its PID, and its snapshot mounts removed, when t ends.
func startContainerd(t *testing.T) string {
	t.Helper()
	vmtest.Require(t, os.Geteuid() == 0, "the containerd import test runs as root (containerd)")
	for _, bin := range []string{"containerd", "ctr"} {
		_, err := exec.LookPath(bin)
		vmtest.Require(t, err == nil, "%s not found: apt-get install -y --no-install-recommends containerd", bin)
	}
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "cvg-ctrd-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "containerd.sock")
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, containerdConfig, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc"), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("containerd", "--config", cfg)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		log.Close()
		// containerd leaves its overlay snapshots' mounts only while
		// containers run; none ran, but unmount anything left below dir.
		_ = exec.Command("umount", "-R", filepath.Join(dir, "root")).Run()
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("removing %s: %v", dir, err)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("containerd exited while starting:\n%s", b)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("containerd did not listen on %s within 20 s:\n%s", sock, b)
		}
	}
	return sock
}

// ctr runs ctr against sock in the k8s.io namespace (the kubelet's).
func ctr(t *testing.T, sock string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ctr", append([]string{"--address", sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// importIntoContainerd imports the archives with `ctr -n k8s.io images
// import` (which unpacks them into the overlayfs snapshotter) into a
// containerd of its own, then checks that each tag is listed, for
// linux/amd64, with the image's config, and runs one program of each
// image in a container (runc).
func importIntoContainerd(t *testing.T, archives ...images.Archive) {
	sock := startContainerd(t)
	for _, a := range archives {
		start := time.Now()
		out := ctr(t, sock, "images", "import", a.Path)
		t.Logf("ctr images import %s (%s): %s", a.Path, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	}
	list := ctr(t, sock, "images", "ls")
	for _, a := range archives {
		var line []string
		for _, l := range strings.Split(list, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == a.Reference {
				line = f
			}
		}
		if line == nil {
			t.Errorf("%s is not listed after the import:\n%s", a.Reference, list)
			continue
		}
		if !strings.Contains(strings.Join(line, " "), "linux/amd64") {
			t.Errorf("%s: platforms %q, want linux/amd64", a.Reference, line)
		}
		// the manifest containerd made from the archive names our config
		var manifest struct {
			Config struct{ Digest string }
		}
		if err := json.Unmarshal([]byte(ctr(t, sock, "content", "get", line[2])), &manifest); err != nil {
			t.Fatalf("%s: manifest %s: %v", a.Reference, line[2], err)
		}
		if manifest.Config.Digest != a.ConfigDigest {
			t.Errorf("%s: containerd's manifest names config %s, the archive %s", a.Reference, manifest.Config.Digest, a.ConfigDigest)
		}
	}
	runs := map[string][]string{
		images.ControllerName: {"/usr/bin/converge-controller", "-help"},
		images.NodeName:       {"/usr/bin/qemu-img", "--version"},
	}
	for _, a := range archives {
		argv := runs[a.Name]
		out, err := exec.Command("ctr", append([]string{"--address", sock, "-n", "k8s.io", "run", "--rm", a.Reference, "images-test-" + a.Name}, argv...)...).CombinedOutput()
		want := map[string]string{images.ControllerName: "-cache-dir", images.NodeName: "qemu-img version"}[a.Name]
		if !strings.Contains(string(out), want) {
			t.Errorf("ctr run %s %s: %v, want %q in:\n%s", a.Reference, strings.Join(argv, " "), err, want, out)
		}
	}
}
