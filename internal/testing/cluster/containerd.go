package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

// containerd's paths: its state (sockets, shim and runc state, the pods'
// network namespaces) under LockDir, its root (images, snapshots) under
// the work directory.
var (
	containerdState  = filepath.Join(LockDir, "containerd")
	containerdSocket = filepath.Join(containerdState, "containerd.sock")
	runcRoot         = filepath.Join(LockDir, "runc")
)

// RegistryHostsDir is containerd's registry host configuration
// directory (CRI registry config_path: <host>/hosts.toml, read at each
// pull; MirrorRegistry writes it).
var RegistryHostsDir = filepath.Join(LockDir, "containerd-certs.d")

// MirrorRegistry makes the CRI pull images of registry host (e.g.
// "ghcr.io") from the plain-HTTP OCI registry at endpoint ("ip:port"), as
// a registry mirror: the repository paths stay, the host changes
// (containerd hosts.toml, capabilities pull and resolve).
func MirrorRegistry(host, endpoint string) error {
	dir := filepath.Join(RegistryHostsDir, host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "https://"+host, "http://"+endpoint)
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(conf), 0o644)
}

// ContainerdAddress is the socket of the cluster's containerd (the CRI
// endpoint of the kubelet, the address of `ctr --address`).
var ContainerdAddress = containerdSocket

// shimSocketDir is where containerd 1.6 puts its shims' sockets whatever
// its state directory (runtime/v2/shim: socketRoot is the default state
// directory).
const shimSocketDir = "/run/containerd/s"

// containerdConfig is containerd's configuration (version 2, as
// containerd 1.6 reads it): the CRI plugin with the sandbox image built
// here, cgroupfs (SystemdCgroup false), overlayfs, runc's state under
// LockDir, CNI binaries and configuration of our own, network namespaces
// under the state directory, and restrict_oom_score_adj because the
// sandbox lacks CAP_SYS_RESOURCE (runc otherwise fails every pod with
// "can't get final child's PID from pipe: EOF", see realcluster.md).
var containerdConfig = template.Must(template.New("containerd").Parse(`version = 2
root = "{{.Root}}"
state = "{{.State}}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{{.Socket}}"

[ttrpc]
  address = "{{.Socket}}.ttrpc"

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "{{.Opt}}"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "{{.PauseImage}}"
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "{{.RuncRoot}}"
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "{{.RegistryHosts}}"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "{{.CNIBin}}"
      conf_dir = "{{.CNIConf}}"
      max_conf_num = 1
`))

// writeContainerdConfig writes containerd's configuration to path and
// empties RegistryHostsDir (a mirror of an earlier run names a registry
// that is gone).
func writeContainerdConfig(path, dir, cniBin, cniConf string) error {
	if err := os.RemoveAll(RegistryHostsDir); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := containerdConfig.Execute(&b, map[string]string{
		"Root": filepath.Join(dir, "containerd"), "State": containerdState, "Socket": containerdSocket,
		"Opt": filepath.Join(dir, "containerd-opt"), "PauseImage": PauseImage, "RuncRoot": runcRoot,
		"CNIBin": cniBin, "CNIConf": cniConf, "RegistryHosts": RegistryHostsDir,
	}); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// ctr runs `ctr --address <socket> -n k8s.io args...` and gives its
// combined output.
func ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", containerdSocket, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// waitContainerd polls `ctr version` until containerd answers on its
// socket, failing early when the process r exits.
func waitContainerd(ctx context.Context, r *running) error {
	for {
		if _, err := os.Stat(containerdSocket); err == nil {
			if _, err := ctr(ctx, "version"); err == nil {
				return nil
			}
		}
		if done, err := r.exited(); done {
			return fmt.Errorf("containerd exited (%v); log %s:\n%s", err, r.log, tail(r.log, 3000))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd did not answer on %s: %w; log %s:\n%s", containerdSocket, ctx.Err(), r.log, tail(r.log, 3000))
		case <-time.After(30 * time.Millisecond):
		}
	}
}

// importImage imports an image archive (docker-archive or OCI layout tar,
// as tarball.Write or `make images` write them) into containerd's k8s.io
// namespace, unpacked for the CRI's overlayfs snapshotter.
func importImage(ctx context.Context, archive string) error {
	if _, err := os.Stat(archive); err != nil {
		return fmt.Errorf("cluster: importing image: %w", err)
	}
	if _, err := ctr(ctx, "images", "import", "--snapshotter", "overlayfs", archive); err != nil {
		return fmt.Errorf("cluster: importing %s: %w", archive, err)
	}
	return nil
}
