package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/converge-dev/converge/internal/testing/safebuffer"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

// TestHostpathCSIFlags runs `converge-node hostpath-csi` with bad flags: each
// fails before anything is opened, with an error naming the problem, and
// creates no pool directory.
func TestHostpathCSIFlags(t *testing.T) {
	dir := t.TempDir()
	sock := "unix://" + filepath.Join(dir, "csi.sock")
	pool := "local=" + filepath.Join(dir, "pool")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing endpoint", []string{"--node-id", "n1", "--storage-pool", pool}, "endpoint: required"},
		{"tcp endpoint", []string{"--endpoint", "tcp://127.0.0.1:1", "--node-id", "n1", "--storage-pool", pool}, "want unix:///absolute/path"},
		{"relative socket", []string{"--endpoint", "unix://csi.sock", "--node-id", "n1", "--storage-pool", pool}, "want unix:///absolute/path"},
		{"missing node id", []string{"--endpoint", sock, "--storage-pool", pool}, "node ID \"\": required"},
		{"no pool", []string{"--endpoint", sock, "--node-id", "n1"}, "at least one NAME=PATH"},
		{"pool without =", []string{"--endpoint", sock, "--node-id", "n1", "--storage-pool", "/var/hpvolumes"}, `storage pool "/var/hpvolumes": want NAME=PATH`},
		{"pool empty name", []string{"--endpoint", sock, "--node-id", "n1", "--storage-pool", "=/x"}, `name "" must be lower-case`},
		{"pool relative path", []string{"--endpoint", sock, "--node-id", "n1", "--storage-pool", "local=pool"}, `path "pool" must be an absolute, clean path`},
		{"pool traversal", []string{"--endpoint", sock, "--node-id", "n1", "--storage-pool", "local=/var/../etc"}, `path "/var/../etc" must be an absolute, clean path`},
		{"pool root", []string{"--endpoint", sock, "--node-id", "n1", "--storage-pool", "local=/"}, "other than /"},
		{"duplicate pool name", []string{"--endpoint", sock, "--node-id", "n1", "--storage-pool", pool, "--storage-pool", "local=" + filepath.Join(dir, "other")}, `storage pool "local": duplicate name`},
		{"duplicate pool path", []string{"--endpoint", sock, "--node-id", "n1", "--storage-pool", pool, "--storage-pool", "second=" + filepath.Join(dir, "pool")}, "already used by another pool"},
		{"bad driver name", []string{"--endpoint", sock, "--node-id", "n1", "--storage-pool", pool, "--driver-name", "-bad"}, `driver name "-bad"`},
		{"missing kubeconfig", []string{"--endpoint", sock, "--node-id", "n1", "--storage-pool", pool, "--kubeconfig", "/nonexistent/kubeconfig"}, `hostpath-csi: kubeconfig "/nonexistent/kubeconfig"`},
		{"relative kubelet dir", []string{"--node-id", "n1", "--storage-pool", pool, "--kubelet-registration", "--kubelet-dir", "kubelet"}, `--kubelet-dir "kubelet": expected an absolute path`},
		{"relative registration path", []string{"--endpoint", sock, "--node-id", "n1", "--storage-pool", pool, "--kubelet-registration", "--kubelet-registration-path", "csi.sock"}, `kubelet registration path (CSI endpoint) "csi.sock"`},
		{"registration socket without registration", []string{"--endpoint", sock, "--node-id", "n1", "--storage-pool", pool, "--registration-socket", "/x/reg.sock"}, "need --kubelet-registration"},
		{"unknown flag", []string{"--pool", pool}, "unknown flag: --pool"},
		{"argument", []string{"extra"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := execute(context.Background(), io.Discard, append([]string{"hostpath-csi"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("hostpath-csi %q: error %v, want one containing %q", tc.args, err, tc.want)
			}
			if matches, _ := filepath.Glob(filepath.Join(dir, "*")); len(matches) != 0 {
				t.Fatalf("hostpath-csi %q created %v", tc.args, matches)
			}
		})
	}
}

// TestHostpathCSIVersion checks --version prints hostpath.Version.
func TestHostpathCSIVersion(t *testing.T) {
	var out bytes.Buffer
	if err := execute(context.Background(), &out, "hostpath-csi", "--version"); err != nil {
		t.Fatal(err)
	}
	if want := "converge-node hostpath-csi " + hostpath.Version + "\n"; out.String() != want {
		t.Fatalf("--version printed %q, want %q", out.String(), want)
	}
}

// TestHostpathCSIBinary builds converge-node with the version stamped by
// -ldflags, runs `converge-node hostpath-csi` on a unix socket, checks
// GetPluginInfo and a CreateVolume/DeleteVolume over the socket, then sends
// SIGTERM: the process exits 0.
func TestHostpathCSIBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the converge-node binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "converge-node")
	const version = "v0.0.0-test"
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X github.com/converge-dev/converge/nodeplane/csi/hostpath.Version="+version, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "hostpath-csi", "--version").Output()
	if err != nil || string(out) != "converge-node hostpath-csi "+version+"\n" {
		t.Fatalf("--version: %q, %v", out, err)
	}
	sock := filepath.Join(dir, "csi", "csi.sock")
	var logs safebuffer.Buffer
	cmd := exec.Command(bin, "hostpath-csi", "--endpoint", "unix://"+sock, "--node-id", "node-1",
		"--storage-pool", "fast="+filepath.Join(dir, "fast"), "--storage-pool", "slow="+filepath.Join(dir, "slow"))
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
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("GetPluginInfo: %v\n%s", err, logs.String())
	}
	if info.GetName() != hostpath.DefaultDriverName || info.GetVendorVersion() != version {
		t.Fatalf("GetPluginInfo = %v, want %s %s", info, hostpath.DefaultDriverName, version)
	}
	cc := csi.NewControllerClient(conn)
	vol, err := cc.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name:       "pvc-1",
		Parameters: map[string]string{hostpath.ParameterStoragePool: "slow"},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "slow", "pvc-1", "data")); err != nil {
		t.Fatalf("volume pvc-1 of pool slow: %v", err)
	}
	if vol.GetVolume().GetCapacityBytes() != hostpath.DefaultVolumeSize {
		t.Errorf("capacity without a range: %d, want %d", vol.GetVolume().GetCapacityBytes(), hostpath.DefaultVolumeSize)
	}
	if _, err := cc.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("converge-node after SIGTERM: %v\n%s", err, logs.String())
	}
}

// TestHostpathCSIRegistration runs `converge-node hostpath-csi
// --kubelet-registration` with a kubelet directory of the test's and plays
// the kubelet's plugin watcher on the registration socket (the real
// kubelet registers it on the real cluster): GetInfo names the driver, a
// CSIPlugin, and the CSI socket under <kubelet-dir>/plugins, which serves
// CSI; a successful registration keeps the driver running; a refusal ends
// the command with the kubelet's error, and both sockets are removed.
func TestHostpathCSIRegistration(t *testing.T) {
	dir, err := os.MkdirTemp("", "hpcsi") // short: a unix socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	kubeletDir := filepath.Join(dir, "kubelet")
	regSock := filepath.Join(kubeletDir, "plugins_registry", hostpath.DefaultDriverName+"-reg.sock")
	csiSock := filepath.Join(kubeletDir, "plugins", hostpath.DefaultDriverName, "csi.sock")
	var out safebuffer.Buffer
	done := make(chan error, 1)
	go func() {
		done <- execute(context.Background(), &out, "hostpath-csi", "--kubelet-registration", "--kubelet-dir", kubeletDir,
			"--node-id", "node-1", "--storage-pool", "local="+filepath.Join(dir, "pool"))
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(regSock); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("hostpath-csi ended: %v\n%s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no registration socket %s after 30 s", regSock)
		}
	}
	dial := func(sock string) *grpc.ClientConn {
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kubelet := registerapi.NewRegistrationClient(dial(regSock))
	info, err := kubelet.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != hostpath.DefaultDriverName || info.GetEndpoint() != csiSock || len(info.GetSupportedVersions()) == 0 {
		t.Fatalf("GetInfo = %v, want %s %s at %s", info, registerapi.CSIPlugin, hostpath.DefaultDriverName, csiSock)
	}
	// what the kubelet does next: dial the endpoint it was given
	if ni, err := csi.NewNodeClient(dial(info.GetEndpoint())).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}); err != nil || ni.GetNodeId() != "node-1" {
		t.Fatalf("NodeGetInfo on %s: %v, %v", info.GetEndpoint(), ni, err)
	}
	if _, err := kubelet.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("hostpath-csi ended after a successful registration: %v\n%s", err, out.String())
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := kubelet.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{Error: "RegisterPlugin error -- no handler registered for plugin type: CSIPlugin"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "refused the plugin registration: RegisterPlugin error -- no handler registered") {
			t.Fatalf("hostpath-csi after the refusal: %v, want the kubelet's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("hostpath-csi still runs 30 s after the kubelet refused it\n%s", out.String())
	}
	for _, sock := range []string{regSock, csiSock} {
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("%s left after exit: %v", sock, err)
		}
	}
}
