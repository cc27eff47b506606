package cluster

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/converge-dev/converge/internal/images"
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
// binary (mode 0755, owner 0:0, zero timestamps), linux/amd64, the epoch
// as its creation time, so the same binary always gives the same image
// digest. It goes through internal/images (Tree, Spec.Image,
// WriteArchive), the writer of converge's own images.
func WriteBinaryImage(img BinaryImage, archive string) error {
	if img.Path == "" || img.Path[0] != '/' {
		return fmt.Errorf("image %s: Path %q: want an absolute path in the image", img.Ref, img.Path)
	}
	tree := images.NewTree()
	if err := tree.CopyFile(img.Path[1:], img.Binary, 0o755, img.Binary); err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	entry := img.Entrypoint
	if len(entry) == 0 {
		entry = []string{img.Path}
	}
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp(filepath.Dir(archive), ".image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	spec := images.Spec{Layers: []images.Layer{{Tree: tree, CreatedBy: "internal/testing/cluster " + img.Path}},
		Config: v1.Config{Entrypoint: entry}}
	image, err := spec.Image(work, "binary", time.Unix(0, 0), gzip.BestSpeed)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	if err := images.WriteArchive(archive, img.Ref, image); err != nil {
		return fmt.Errorf("image %s: writing %s: %w", img.Ref, archive, err)
	}
	return nil
}

// BuildStatic builds the main package pkg (an import path of this module,
// e.g. "./internal/testing/cluster/echoserver", relative to the repository
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
