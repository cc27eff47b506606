// Package virtctltest runs the upstream KubeVirt virtctl binary
// (bin/virtctl, built from kubevirt.io/kubevirt by hack/virtctl/build.sh,
// `make bin/virtctl`) in tests, so that converge is checked against the
// client KubeVirt users already have.
package virtctltest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// Path gives bin/virtctl. Without it the test is skipped, or fails when
// CONVERGE_REQUIRE_NODEPLANE is set (`make test` builds it).
func Path(t testing.TB) string {
	t.Helper()
	bin, err := controlplane.BinDir()
	p := filepath.Join(bin, "virtctl")
	if err == nil {
		if _, err = os.Stat(p); err == nil {
			return p
		}
	}
	msg := "bin/virtctl is missing: run `make bin/virtctl` (hack/virtctl/build.sh)"
	if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Result is what one virtctl run gave.
type Result struct {
	Stdout, Stderr string
	// Code is the exit code (-1 when it did not exit by itself).
	Code int
}

// Run runs virtctl with args against kubeconfig, at most 2 minutes, and
// gives its output and exit code; failing to start it fails t.
func Run(t testing.TB, kubeconfig string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Path(t), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("virtctl %v: %v", args, err)
	}
	t.Logf("virtctl %v: exit %d\nstdout: %s\nstderr: %s", args, code, out.String(), errb.String())
	return Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}
