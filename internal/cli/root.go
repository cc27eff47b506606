// Package cli implements the `converge` command line: vet, render, diff,
// apply, install, get, tree, events, reconcile, suspend, resume and
// version. Main is called by cmd/converge and, in-process, by the
// testscript tests.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-dev/converge/internal/graph"
)

// Version is the converge version, set at build time with
// -ldflags "-X github.com/converge-dev/converge/internal/cli.Version=…".
var Version = "dev"

// globals are the flags every command shares.
type globals struct {
	kubeconfig  string
	kubecontext string
	// requestTimeout bounds each API request (0: unbounded).
	requestTimeout time.Duration
	facts          string
	stdout         io.Writer
	stderr         io.Writer
	engine         *graph.Engine
}

// Main runs the CLI with os.Args and returns the process exit code: 0 on
// success, 1 on invalid input, a failed apply or a failed reconcile
// (`converge diff`: 0 without differences, 1 with, 2 on an error, as
// kubectl diff).
// SIGINT and SIGTERM cancel the command (converge events --watch ends
// with 0).
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return RunContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
}

// Run runs the CLI with args, writing to stdout and stderr; it returns
// the exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	return RunContext(context.Background(), args, stdout, stderr)
}

// RunContext is Run with a context whose cancellation stops the command
// (the end of converge events --watch, an abandoned reconcile wait).
func RunContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, args, nil, stdout, stderr)
}

// run is RunContext reading stdin (nil: os.Stdin, cobra's default).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	if stdin != nil {
		root.SetIn(stdin)
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		code := 1
		var ec *exitCodeError
		if errors.As(err, &ec) {
			code, err = ec.code, ec.err
		}
		var silent *silentError
		if err != nil && !errors.As(err, &silent) {
			fmt.Fprintln(stderr, "error:", err)
		}
		return code
	}
	return 0
}

// silentError is an error already reported on stderr.
type silentError struct{ error }

// exitCodeError ends a command with an exit code other than 1: err, when
// not nil, is printed as any error (e.g. `converge diff` exits 1 when it
// found differences, with nothing more to say, and 2 on an error, as
// kubectl diff).
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitCodeError) Unwrap() error { return e.err }

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "converge",
		Short:         "Run a KubeVirt virtualization stack from a HyperConverged config in Git",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	pf.StringVar(&g.kubecontext, "context", "", "the kubeconfig context to use")
	pf.DurationVar(&g.requestTimeout, "request-timeout", DefaultRequestTimeout, "how long one request to the API server may take before the command gives up (a watch or stream: until its response starts); 0 waits forever, as kubectl's --request-timeout")
	root.AddCommand(newVet(g), newRender(g), newDiff(g), newApply(g), newVersion(g),
		newInstall(g), newGet(g), newTree(g), newEvents(g),
		newReconcile(g), newSuspend(g), newResume(g), newVM(g),
		newImageUpload(g))
	return root
}

// engineFor returns the CUE engine, built once per process.
func (g *globals) engineFor() (*graph.Engine, error) {
	if g.engine == nil {
		e, err := graph.NewEngine()
		if err != nil {
			return nil, err
		}
		g.engine = e
	}
	return g.engine, nil
}
