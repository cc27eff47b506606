package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// BinaryImage describes a one-layer image holding a single static
// binary, the way the sandbox image and the test images are made.
type BinaryImage struct {
	// Ref is the image reference written into the archive, e.g.
	// "localhost/converge/pause:1" (pods use it with imagePullPolicy
	// Never or IfNotPresent).
	Ref string
	// Binary is the path of the static binary to pack.
	Binary string
	// Path is where the binary lands in the image (e.g. "/pause").
	Path string
	// Entrypoint is the image's entrypoint (default: [Path]).
	Entrypoint []string
}

// WriteBinaryImage writes img as a docker-archive tarball (what `ctr
// images import` and ImportImage read) to archive: one layer holding the
// binary (mode 0755, owner 0:0, zero timestamps), linux/<GOARCH>, no
// creation time, so the same binary always gives the same image digest.
// It uses go-containerregistry (tarball.LayerFromOpener, mutate,
// tarball.Write).
func WriteBinaryImage(img BinaryImage, archive string) error {
	ref, err := name.ParseReference(img.Ref)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	bin, err := os.ReadFile(img.Binary)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	if img.Path == "" || img.Path[0] != '/' {
		return fmt.Errorf("image %s: Path %q: want an absolute path in the image", img.Ref, img.Path)
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	epoch := time.Unix(0, 0).UTC()
	if err := tw.WriteHeader(&tar.Header{Name: img.Path[1:], Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg,
		ModTime: epoch, AccessTime: epoch, ChangeTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	data := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return fmt.Errorf("image %s: layer: %w", img.Ref, err)
	}
	image, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	entry := img.Entrypoint
	if len(entry) == 0 {
		entry = []string{img.Path}
	}
	cf, err := image.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{}
	cf.Config.Entrypoint = entry
	image, err = mutate.ConfigFile(image, cf)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return err
	}
	tmp := archive + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, image); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("image %s: writing %s: %w", img.Ref, archive, err)
	}
	return os.Rename(tmp, archive)
}

// BuildStatic builds the main package pkg (an import path of this module,
// e.g. "./internal/testing/cluster/pause", relative to the repository
// root) into out as a static, reproducible binary (CGO_ENABLED=0,
// -trimpath, no build ID).
func BuildStatic(ctx context.Context, pkg, out string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, bytes.TrimSpace(b))
	}
	return nil
}

// BuildGoImage builds the main package pkg statically (BuildStatic) and
// packs it as the one-layer image ref (WriteBinaryImage) with the binary
// at /<base name of pkg>, writing the archive to archive.
func BuildGoImage(ctx context.Context, pkg, ref, archive string) error {
	bin := archive + ".bin"
	defer os.Remove(bin)
	if err := BuildStatic(ctx, pkg, bin); err != nil {
		return err
	}
	return WriteBinaryImage(BinaryImage{Ref: ref, Binary: bin, Path: "/" + filepath.Base(pkg)}, archive)
}

// repoRoot finds the repository root above the working directory (the
// directory holding go.mod and hack/controlplane).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "controlplane", "build.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("cluster: no repository root (with hack/controlplane) above the working directory")
		}
		dir = parent
	}
}
