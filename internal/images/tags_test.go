package images_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/converge-dev/converge/internal/images"
	"github.com/converge-dev/converge/internal/testing/vmtest"
)

// TestBuildTagsLeaveOutPlugin: with images.BuildTags no converge binary
// links Go's plugin package (which makes the linker export every
// symbol), and without them converge-controller does, through
// kustomize/api: the tag is what keeps it out, so a dependency that brings
// the package back by another path fails here.
func TestBuildTagsLeaveOutPlugin(t *testing.T) {
	deps := func(t *testing.T, tags string, pkgs ...string) []string {
		t.Helper()
		args := append([]string{"list", "-deps", "-tags", tags}, pkgs...)
		cmd := exec.Command("go", args...)
		cmd.Dir = vmtest.RepoRoot(t)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		return strings.Fields(string(out))
	}
	if got := deps(t, images.BuildTags, "./cmd/converge", "./cmd/converge-controller", "./cmd/converge-node"); slices.Contains(got, "plugin") {
		t.Errorf("with -tags %s a converge binary still links package plugin", images.BuildTags)
	}
	if got := deps(t, "", "./cmd/converge-controller"); !slices.Contains(got, "plugin") {
		t.Errorf("without -tags %s converge-controller links no package plugin: the tag may be dropped", images.BuildTags)
	}
}
