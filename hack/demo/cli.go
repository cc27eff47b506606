package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// converge runs the built converge CLI as a user does, `converge args…`
// (run).
func (d *demo) converge(ctx context.Context, args ...string) (time.Duration, error) {
	return d.run(ctx, "converge", d.env.CLI, args...)
}

// kubectl runs bin/kubectl (upstream kubectl at the cluster's version,
// `make demo` builds it) as a user does, `kubectl args…` (run).
func (d *demo) kubectl(ctx context.Context, args ...string) (time.Duration, error) {
	return d.run(ctx, "kubectl", d.kubectlBin, args...)
}

// run runs the program at path as `name args…` with KUBECONFIG set to the
// cluster's admin kubeconfig, echoing the command line and streaming its
// stdout and stderr to the demo's stdout. It gives how long it ran, and
// an error naming the command when it exited non-zero (its message was
// printed).
func (d *demo) run(ctx context.Context, name, path string, args ...string) (time.Duration, error) {
	fmt.Printf("\n$ %s %s\n", name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.env.Cluster.Kubeconfig)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			return took, ctx.Err()
		}
		return took, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return took, nil
}

// show runs `converge args…` as converge does, for the commands whose
// output is the point and whose duration is not.
func (d *demo) show(ctx context.Context, args ...string) error {
	_, err := d.converge(ctx, args...)
	return err
}
