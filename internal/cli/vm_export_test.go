package cli

import (
	"context"
	"io"
)

// RunWithStdin is RunContext with stdin (for converge vm console) instead
// of os.Stdin.
func RunWithStdin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(ctx, args, stdin, stdout, stderr)
}
