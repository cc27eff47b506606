package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// PauseSource is Kubernetes' own sandbox program, build/pause/linux/pause.c
// of the k8s.io/kubernetes module the cluster's kubelet is built from
// (hack/controlplane/go.mod), as registry.k8s.io/pause ships it.
const PauseSource = "build/pause/linux/pause.c"

// pauseTag is the pause version of that source (build/pause/Makefile TAG).
const pauseTag = "3.10.2"

// BuildPauseImage builds Kubernetes' pause from its source (PauseSource,
// the module fetched through the Go module proxy when not in the module
// cache) with the C compiler and the flags of build/pause/Makefile
// (-Os -Wall -Werror -static), and packs it as the one-layer image
// PauseImage with the binary at /pause (WriteBinaryImage), writing the
// archive to archive. Errors name the step: finding the module, compiling.
func BuildPauseImage(ctx context.Context, archive string) error {
	src, version, err := pauseSource(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return err
	}
	bin := archive + ".bin"
	defer os.Remove(bin)
	cmd := exec.CommandContext(ctx, "gcc", "-Os", "-Wall", "-Werror", "-static",
		"-DVERSION=v"+pauseTag+"-"+version, "-o", bin, src)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("compiling %s: %w: %s", src, err, bytes.TrimSpace(b))
	}
	return WriteBinaryImage(BinaryImage{Ref: PauseImage, Binary: bin, Path: "/pause"}, archive)
}

// pauseSource gives the path of PauseSource in the module cache and the
// module's version, downloading the module hack/controlplane pins.
func pauseSource(ctx context.Context) (path, version string, err error) {
	root, err := repoRoot()
	if err != nil {
		return "", "", err
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "k8s.io/kubernetes")
	cmd.Dir = filepath.Join(root, "hack", "controlplane")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("go mod download k8s.io/kubernetes (for %s): %w: %s", PauseSource, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var m struct{ Dir, Version string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", "", fmt.Errorf("go mod download k8s.io/kubernetes: no module directory in %q", out)
	}
	return filepath.Join(m.Dir, PauseSource), m.Version, nil
}
