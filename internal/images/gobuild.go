package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RepoRoot gives the directory of converge's go.mod at or above the
// working directory, where GoBuild runs.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/converge-dev/converge\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of github.com/converge-dev/converge above the working directory")
		}
		dir = parent
	}
}

// GoBuild builds pkg (as ./cmd/converge-node) of the module at root into
// out with -tags BuildTags and -ldflags LDFlags(version), with or without
// cgo: the flags of
// `make build`, so that both share Go's build cache (no -trimpath: the
// binaries, and so the images, depend on the checkout's path as well as
// on its contents). The error names the package and carries go's stderr.
func GoBuild(ctx context.Context, root, out, pkg, version string, cgo bool) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", BuildTags, "-ldflags", LDFlags(version), "-o", out, pkg)
	cmd.Dir = root
	env := "CGO_ENABLED=0"
	if cgo {
		env = "CGO_ENABLED=1"
	}
	cmd.Env = append(os.Environ(), env)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s go build %s: %w\n%s", env, pkg, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
