package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// RunWithStdin is RunContext with stdin (for converge vm console) instead
// of os.Stdin.
func RunWithStdin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		var silent *silentError
		if !errors.As(err, &silent) {
			fmt.Fprintln(stderr, "error:", err)
		}
		return 1
	}
	return 0
}
