package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/converge-dev/converge/internal/images"
)

// Artifacts are what Build made: the three binaries of one version and
// the two image archives tagged with it.
type Artifacts struct {
	// Version of every binary and tag of both images.
	Version string
	// CLI, Controller and Node are the built converge,
	// converge-controller (CGO_ENABLED=0, as in its image) and
	// converge-node (cgo, libvirt).
	CLI, Controller, Node string
	// Images are the archives (images.Result.Controller and .Node, with
	// Skipped set when their inputs had not changed).
	Images images.Result
	// GoBuild and ImageBuild are how long the Go builds and images.Build
	// took.
	GoBuild, ImageBuild time.Duration
}

// ErrCannotRun wraps what is missing on this machine for Build or Start
// (a program, a package, a binary of bin/, root, the Debian mirror): the
// tests skip on it, unless CONVERGE_REQUIRE_NODEPLANE=1.
var ErrCannotRun = errors.New("the e2e cluster cannot run here")

// Build builds the CLI, converge-controller and converge-node with
// o.Version into o.Out/build (Go's build cache makes a rebuild cheap: the
// flags are `make build`'s) and the image archives of that version into
// o.Out with images.Build (Debian packages from o.Bin/images/apt; an
// archive whose inputs did not change is kept). Builds of one o.Out are
// serialised with a lock file, since worktrees may share bin/.
func Build(ctx context.Context, o Options) (Artifacts, error) {
	if err := checkBuild(o.Bin); err != nil {
		return Artifacts{}, err
	}
	root, err := images.RepoRoot()
	if err != nil {
		return Artifacts{}, err
	}
	if err := os.MkdirAll(filepath.Join(o.Out, "build"), 0o755); err != nil {
		return Artifacts{}, err
	}
	unlock, err := lock(filepath.Join(o.Out, "lock"))
	if err != nil {
		return Artifacts{}, err
	}
	defer unlock()
	p := writerOrDiscard(o.Progress)

	a := Artifacts{Version: o.Version,
		CLI:        filepath.Join(o.Out, "build", "converge"),
		Controller: filepath.Join(o.Out, "build", images.ControllerName),
		Node:       filepath.Join(o.Out, "build", images.NodeName)}
	start := time.Now()
	for _, b := range []struct {
		out, pkg string
		cgo      bool
	}{
		{a.CLI, "./cmd/converge", true},
		{a.Controller, "./cmd/converge-controller", false},
		{a.Node, "./cmd/converge-node", true},
		// the CLI the controller image carries for its cli-download
		{filepath.Join(o.Out, "build", "cli", runtime.GOARCH, runtime.GOOS, "converge"), "./cmd/converge", false},
	} {
		if err := images.GoBuild(ctx, root, b.out, b.pkg, o.Version, b.cgo); err != nil {
			return a, err
		}
	}
	a.GoBuild = time.Since(start)
	fmt.Fprintf(p, "e2e: built converge, converge-controller and converge-node %s in %s\n", o.Version, a.GoBuild.Round(time.Millisecond))

	imo, err := images.DefaultOptions(o.Bin)
	if err != nil {
		return a, err
	}
	imo.Version, imo.Out = o.Version, o.Out
	imo.ControllerBinary, imo.NodeBinary, imo.CLIDir = a.Controller, a.Node, filepath.Join(o.Out, "build", "cli")
	imo.Progress = o.Progress
	start = time.Now()
	res, err := images.Build(ctx, imo)
	a.Images, a.ImageBuild = res, time.Since(start)
	if err != nil {
		if errors.Is(err, images.ErrAptUnreachable) {
			return a, fmt.Errorf("%w: %w", ErrCannotRun, err)
		}
		return a, fmt.Errorf("building the images: %w", err)
	}
	fmt.Fprintf(p, "e2e: images %s (%s) and %s (%s) in %s\n", res.Controller.Reference, state(res.Controller),
		res.Node.Reference, state(res.Node), a.ImageBuild.Round(time.Millisecond))
	return a, nil
}

// state says whether an archive was written or kept.
func state(a images.Archive) string {
	if a.Skipped {
		return "unchanged"
	}
	return "built"
}

// debianKeyring is the keyring images.BookwormSources names.
const debianKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// checkBuild reports, wrapped in ErrCannotRun, what Build needs and does
// not find: apt-get, dpkg-deb and Debian's archive keyring (the node
// image's Debian packages), pkg-config with libvirt's development files
// (converge-node's cgo link), git (the Git server of the tests) and the
// CNI plugins of bin/cni.
func checkBuild(bin string) error {
	var missing []string
	for _, c := range []struct{ cmd, pkg string }{{"apt-get", "apt"}, {"dpkg-deb", "dpkg"}, {"pkg-config", "pkg-config"}, {"git", "git"}} {
		if _, err := exec.LookPath(c.cmd); err != nil {
			missing = append(missing, fmt.Sprintf("%s not in PATH (apt-get install -y %s)", c.cmd, c.pkg))
		}
	}
	if _, err := os.Stat(debianKeyring); err != nil {
		missing = append(missing, debianKeyring+" missing (apt-get install -y debian-archive-keyring): the node image's packages are checked against it")
	}
	if err := exec.Command("pkg-config", "--exists", "libvirt").Run(); err != nil {
		missing = append(missing, "libvirt's development files (apt-get install -y libvirt-dev): converge-node links libvirt")
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(bin, "cni", p)); err != nil {
			missing = append(missing, fmt.Sprintf("%s not in %s (make cni)", p, filepath.Join(bin, "cni")))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s", ErrCannotRun, strings.Join(missing, "; "))
	}
	return nil
}

// lock takes an exclusive flock on path and gives its release.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: flock: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// writerOrDiscard gives w, or io.Discard for nil.
func writerOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
