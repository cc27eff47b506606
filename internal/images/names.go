package images

import (
	"debug/buildinfo"
	"fmt"
	"strings"
)

// Repositories of converge's images. The controller's is also the default
// of components/controller (#In.image); TestControllerReferenceMatchesBundle
// fails when the two drift.
const (
	ControllerRepository = "ghcr.io/converge-dev/converge-controller"
	NodeRepository       = "ghcr.io/converge-dev/converge-node"
)

// VersionVariable is the variable `converge version` prints; the Makefile
// and Build set it in every binary with -ldflags -X (LDFlags).
const VersionVariable = "github.com/converge-dev/converge/internal/cli.Version"

// DefaultVersion is VersionVariable's value when no -X sets it
// (internal/cli/root.go).
const DefaultVersion = "dev"

// ControllerReference gives the tag of the converge-controller image of
// version: ghcr.io/converge-dev/converge-controller:<version>.
func ControllerReference(version string) string { return ControllerRepository + ":" + version }

// NodeReference gives the tag of the converge-node image of version:
// ghcr.io/converge-dev/converge-node:<version>.
func NodeReference(version string) string { return NodeRepository + ":" + version }

// BuildTags are the build tags of every converge binary (`make build`'s
// GOTAGS, GoBuild): kustomize_disable_go_plugin_support leaves out
// kustomize/api's loader of Go plugins (reached through fluxcd/pkg/ssa's
// kstatus poller; converge loads no kustomize plugin), and with it Go's
// plugin package, whose presence makes the linker export every symbol:
// converge-controller is 145 MB instead of 186, about 20 MiB less
// resident.
const BuildTags = "kustomize_disable_go_plugin_support"

// LDFlags gives the -ldflags value that sets VersionVariable to version,
// the same for every binary (`make build`, `make images`).
func LDFlags(version string) string { return "-X " + VersionVariable + "=" + version }

// BinaryVersion gives the version a Go binary at path was built with: the
// value of "-X <VersionVariable>=…" in the -ldflags its build information
// records, or DefaultVersion when it sets none. It fails for a file that
// is not a Go binary.
func BinaryVersion(path string) (string, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: reading Go build information: %w", path, err)
	}
	version := DefaultVersion
	for _, s := range bi.Settings {
		if s.Key != "-ldflags" {
			continue
		}
		f := strings.Fields(s.Value)
		for i, w := range f {
			def := ""
			switch {
			case w == "-X" && i+1 < len(f):
				def = f[i+1]
			case strings.HasPrefix(w, "-X="):
				def = strings.TrimPrefix(w, "-X=")
			}
			if v, ok := strings.CutPrefix(def, VersionVariable+"="); ok {
				version = strings.Trim(v, `"'`)
			}
		}
	}
	return version, nil
}
