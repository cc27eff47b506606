// Command images builds converge's container images without a Docker
// engine (`make images`): it builds converge-controller (CGO_ENABLED=0)
// and converge-node (cgo, libvirt) with -ldflags -X setting
// internal/cli.Version to -version, into bin/images/build, then writes
// bin/images/converge-controller.tar and bin/images/converge-node.tar,
// docker-archive tarballs tagged ghcr.io/converge-dev/<name>:<version>,
// with internal/images.Build. Import them into containerd with
//
//	ctr -n k8s.io images import bin/images/converge-node.tar
//
// The Debian packages of the node image are downloaded with apt into
// bin/images/apt (lists fetched once; -refresh updates them). An archive
// whose inputs did not change is left as it is (see images.Build); the Go
// builds are incremental through Go's build cache.
//
// Usage (from the repository, needs apt-get, dpkg-deb, pkg-config and
// libvirt-dev; bin/cni from `make cni`):
//
//	go run ./hack/images -version v0.3.0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/converge-dev/converge/internal/images"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run() error {
	version := flag.String("version", images.DefaultVersion, "converge version: the images' tag and internal/cli.Version of the binaries")
	bin := flag.String("bin", "", "the repository's bin directory (default: bin/ beside go.mod)")
	refresh := flag.Bool("refresh", false, "run apt-get update even when bin/images/apt has package lists")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := images.RepoRoot()
	if err != nil {
		return err
	}
	if *bin == "" {
		*bin = filepath.Join(root, "bin")
	}
	o, err := images.DefaultOptions(*bin)
	if err != nil {
		return err
	}
	o.Version = *version
	o.Apt.Refresh = *refresh
	o.Progress = os.Stdout
	for _, p := range o.CNIPlugins {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("CNI plugin %s missing: run make cni", p)
		}
	}

	start := time.Now()
	if err := goBuild(ctx, root, o.ControllerBinary, "./cmd/converge-controller", *version, false); err != nil {
		return err
	}
	if err := goBuild(ctx, root, o.NodeBinary, "./cmd/converge-node", *version, true); err != nil {
		return err
	}
	// the CLI the controller's cli-download serves, for this platform
	// (make cli-binaries adds the others beside it)
	if err := goBuild(ctx, root, filepath.Join(o.CLIDir, runtime.GOARCH, runtime.GOOS, "converge"), "./cmd/converge", *version, false); err != nil {
		return err
	}
	res, err := images.Build(ctx, o)
	if err != nil {
		if errors.Is(err, images.ErrAptUnreachable) {
			return fmt.Errorf("%w\n(the node image is made of Debian packages; with the mirror reachable, run again: make images)", err)
		}
		return err
	}
	for _, a := range []images.Archive{res.Controller, res.Node} {
		what := "written"
		if a.Skipped {
			what = "up to date"
		}
		fmt.Printf("images: %s %s: %s (%.1f MB; %.1f MB unpacked, %d files; image %s)\n",
			a.Reference, what, a.Path, float64(a.Size)/1e6, float64(a.UncompressedSize)/1e6, a.Files, a.ConfigDigest)
	}
	fmt.Printf("images: done in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// goBuild builds pkg into out with images.GoBuild, saying so.
func goBuild(ctx context.Context, root, out, pkg, version string, cgo bool) error {
	start := time.Now()
	fmt.Printf("images: go build %s (cgo %v)\n", pkg, cgo)
	if err := images.GoBuild(ctx, root, out, pkg, version, cgo); err != nil {
		return err
	}
	fmt.Printf("images: built %s in %s\n", out, time.Since(start).Round(time.Millisecond))
	return nil
}
