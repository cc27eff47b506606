package vmtest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BuildBinaries builds the main packages pkgs (relative to the
// repository, like "./cmd/converge-node") with one `go build`, which
// compiles their shared dependencies once and in parallel, into a
// temporary directory, and gives the binaries' paths in the order of pkgs.
func BuildBinaries(t testing.TB, pkgs ...string) []string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = RepoRoot(t)
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v:\n%s", strings.Join(pkgs, " "), err, b)
	}
	t.Logf("go build %s: %s", strings.Join(pkgs, " "), time.Since(start).Round(time.Millisecond))
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = filepath.Join(dir, filepath.Base(p))
	}
	return out
}
