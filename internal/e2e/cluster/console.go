package cluster

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/converge-dev/converge/internal/testing/safebuffer"
)

// ReadConsole runs `converge vm console NAME -n namespace` (the built CLI,
// the cluster's admin kubeconfig: a client certificate, through
// converge-controller's virt-api) until its output holds
// want, then ends it by closing its stdin (the end of stdin ends the
// console, as Ctrl+]); it gives the output, or an error with what the
// command printed when want did not come within timeout or the command
// ended first.
func (e *Env) ReadConsole(ctx context.Context, namespace, name, want string, timeout time.Duration) (string, error) {
	return e.readConsole(ctx, "converge vm console", []string{e.CLI, "--kubeconfig", e.Cluster.Kubeconfig, "vm", "console", name, "-n", namespace}, name, want, timeout)
}

// ReadConsoleVirtctl is ReadConsole with the upstream virtctl binary at
// path (`virtctl console NAME -n namespace`, the same kubeconfig).
func (e *Env) ReadConsoleVirtctl(ctx context.Context, virtctl, namespace, name, want string, timeout time.Duration) (string, error) {
	return e.readConsole(ctx, "virtctl console", []string{virtctl, "--kubeconfig", e.Cluster.Kubeconfig, "console", name, "-n", namespace}, name, want, timeout)
}

// readConsole runs argv (what: its name in errors) as ReadConsole says.
func (e *Env) readConsole(ctx context.Context, what string, argv []string, name, want string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	out, errOut := &safebuffer.Buffer{}, &safebuffer.Buffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(timeout)
	for !strings.Contains(out.String(), want) {
		select {
		case err := <-exited:
			return out.String(), fmt.Errorf("%s %s ended (%v) before %q; stdout:\n%s\nstderr:\n%s", what, name, err, want, lastBytes(out.String(), 2000), errOut.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			return out.String(), fmt.Errorf("no %q from %s %s within %s; stdout:\n%s\nstderr:\n%s", want, what, name, timeout, lastBytes(out.String(), 2000), errOut.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	_ = stdin.Close()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			return out.String(), err
		}
		if err != nil {
			return out.String(), fmt.Errorf("%s %s: %v after the end of stdin; stderr:\n%s", what, name, err, errOut.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return out.String(), fmt.Errorf("%s %s still ran 10 s after the end of its stdin", what, name)
	}
	return out.String(), nil
}

// lastBytes gives the last n bytes of s, marked "…" when cut.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
