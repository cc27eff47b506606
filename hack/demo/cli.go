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
// with KUBECONFIG set to the cluster's admin kubeconfig, echoing the
// command line and streaming its stdout and stderr to the demo's stdout.
// It gives how long it ran, and an error naming the command when it
// exited non-zero (its message was printed).
func (d *demo) converge(ctx context.Context, args ...string) (time.Duration, error) {
	fmt.Printf("\n$ converge %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, d.env.CLI, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.env.Cluster.Kubeconfig)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			return took, ctx.Err()
		}
		return took, fmt.Errorf("converge %s: %w", strings.Join(args, " "), err)
	}
	return took, nil
}

// show runs `converge args…` as converge does, for the commands whose
// output is the point and whose duration is not.
func (d *demo) show(ctx context.Context, args ...string) error {
	_, err := d.converge(ctx, args...)
	return err
}
