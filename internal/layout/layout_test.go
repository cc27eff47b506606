// Package layout_test checks the promises the tree makes about itself
// (docs/architecture.md, "Layout"): the cluster side never links the node
// side, the node side reaches the cluster only through the contract in
// api/, the contract depends on nothing of ours, the shipped binaries link
// no test support, and the repository root stays small. It reads the
// module's real import graph with `go list`.
package layout_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/converge-dev/converge"

// pkg is one package of the module as `go list` sees it.
type pkg struct {
	path        string   // import path relative to the module ("" for the root)
	deps        []string // transitive non-test dependencies, full import paths
	testImports []string // direct imports of its _test.go files, full paths
}

// listPackages runs `go list` over the whole module from its root.
func listPackages(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-f",
		`{{.ImportPath}}|{{join .Deps " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	cmd.Dir = root(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "|", 3)
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		p := pkg{path: rel(f[0]), deps: strings.Fields(f[1]), testImports: strings.Fields(f[2])}
		pkgs[p.path] = p
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list gave %d packages; want the whole module", len(pkgs))
	}
	return pkgs
}

// root gives the module root (two levels above this package).
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// rel gives an import path relative to the module, or "" for foreign ones.
func rel(importPath string) string {
	if importPath == module {
		return "."
	}
	if s, ok := strings.CutPrefix(importPath, module+"/"); ok {
		return s
	}
	return ""
}

// under reports whether the module-relative path p is dir or below it.
func under(p string, dirs ...string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// offending gives the entries of deps (full import paths) that are
// foreign paths starting with one of foreign, or module paths under one of
// ours.
func offending(deps, ours, foreign []string) []string {
	var bad []string
	for _, d := range deps {
		if r := rel(d); r != "" {
			if under(r, ours...) {
				bad = append(bad, d)
			}
			continue
		}
		for _, f := range foreign {
			if d == f || strings.HasPrefix(d, f+"/") {
				bad = append(bad, d)
			}
		}
	}
	return bad
}

// nodeLibraries are what only node agents may link: netlink, network
// namespaces, libcni and the CNI plugins, libvirt and its XML, the CSI
// spec's gRPC services.
var nodeLibraries = []string{
	"github.com/vishvananda/netlink",
	"github.com/vishvananda/netns",
	"github.com/containernetworking/cni/libcni",
	"github.com/containernetworking/plugins",
	"libvirt.org/go/libvirt",
	"libvirt.org/go/libvirtxml",
	"github.com/container-storage-interface/spec",
	"k8s.io/kubelet/pkg/apis/pluginregistration",
}

// testSupport is what no shipped binary may link: test support, the
// end-to-end tests, benchmarks and layout checks, and the image builder.
var testSupport = []string{"internal/testing", "internal/e2e", "internal/bench", "internal/layout", "internal/images"}

func TestBinariesLink(t *testing.T) {
	pkgs := listPackages(t)
	for _, tc := range []struct {
		binary  string
		ours    []string // module directories it must not link
		foreign []string // foreign import path prefixes it must not link
	}{
		{"cmd/converge-controller", append([]string{"nodeplane"}, testSupport...), nodeLibraries},
		{"cmd/converge", append([]string{"nodeplane"}, testSupport...), nodeLibraries},
		{"cmd/converge-node", append([]string{"operators", "gitops", "reconciler", "internal/graph", "internal/webhook"}, testSupport...), nil},
	} {
		t.Run(tc.binary, func(t *testing.T) {
			p, ok := pkgs[tc.binary]
			if !ok {
				t.Fatalf("no package %s", tc.binary)
			}
			if bad := offending(p.deps, tc.ours, tc.foreign); len(bad) > 0 {
				t.Errorf("%s links %d package(s) it must not: %s", tc.binary, len(bad), strings.Join(bad, ", "))
			}
		})
	}
}

func TestImportDirection(t *testing.T) {
	pkgs := listPackages(t)
	rules := []struct {
		name    string
		from    []string // packages under these directories…
		except  []string // …but not these…
		ours    []string // …depend on nothing under these…
		foreign []string // …nor on these foreign paths
	}{
		{name: "cluster side never links the node side",
			from: []string{"operators", "gitops", "reconciler", "internal/graph", "internal/webhook", "internal/cli", "cmd/converge-controller", "cmd/converge"},
			ours: []string{"nodeplane"}, foreign: nodeLibraries},
		{name: "node side reaches the cluster only through api/",
			from: []string{"nodeplane", "cmd/converge-node"},
			ours: []string{"operators", "gitops", "reconciler", "internal/graph", "internal/webhook", "internal/cli"}},
		{name: "the contract depends on nothing of ours",
			from: []string{"api"},
			ours: []string{"operators", "gitops", "reconciler", "nodeplane", "internal", "cmd"}},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			n := 0
			for _, p := range pkgs {
				if !(slices.Contains(r.from, ".") || under(p.path, r.from...)) || under(p.path, r.except...) {
					continue
				}
				n++
				if bad := offending(p.deps, r.ours, r.foreign); len(bad) > 0 {
					t.Errorf("%s depends on %s", p.path, strings.Join(bad, ", "))
				}
			}
			if n == 0 {
				t.Fatalf("rule matched no package")
			}
		})
	}
}

// TestTestSupportStaysInTests: test support (internal/testing/..., or a
// package named *test in an internal/ directory beside the tests it
// serves, such as operators/virt/virtcontroller/internal/virttest) is
// linked only by tests, the benchmarks, the end-to-end tests, this
// package and the hack/ programs (the demo, the local cluster), never by a
// package a binary ships.
func TestTestSupportStaysInTests(t *testing.T) {
	pkgs := listPackages(t)
	support := func(p string) bool {
		return under(p, "internal/testing") || (strings.Contains("/"+p, "/internal/") && strings.HasSuffix(p, "test"))
	}
	n := 0
	for _, p := range pkgs {
		if support(p.path) {
			n++
			continue
		}
		if under(p.path, append([]string{"hack"}, testSupport...)...) {
			continue
		}
		for _, d := range p.deps {
			if r := rel(d); r != "" && support(r) {
				t.Errorf("%s depends on the test support package %s", p.path, r)
			}
		}
	}
	if n == 0 {
		t.Fatal("found no test support package")
	}
}

// TestNodeTestsStayOnTheirSide: tests under nodeplane/ import no
// controller package either; tests that run both sides live in
// internal/e2e.
func TestNodeTestsStayOnTheirSide(t *testing.T) {
	pkgs := listPackages(t)
	for _, p := range pkgs {
		if !under(p.path, "nodeplane") {
			continue
		}
		if bad := offending(p.testImports, []string{"operators", "gitops", "reconciler"}, nil); len(bad) > 0 {
			t.Errorf("tests of %s import %s: move them to internal/e2e", p.path, strings.Join(bad, ", "))
		}
	}
}

// TestRootStaysSmall: the repository root holds at most 18 tracked
// entries (dotfiles aside), so that the top level reads as the
// architecture.
func TestRootStaysSmall(t *testing.T) {
	cmd := exec.Command("git", "ls-files")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		top, _, _ := strings.Cut(f, "/")
		if top != "" && !strings.HasPrefix(top, ".") {
			seen[top] = true
		}
	}
	if len(seen) > 18 {
		names := make([]string, 0, len(seen))
		for n := range seen {
			names = append(names, n)
		}
		slices.Sort(names)
		t.Errorf("the root holds %d entries, want at most 18: %s", len(seen), strings.Join(names, " "))
	}
}
