package main

import (
	"context"
	"io"
)

// execute runs converge-node with args until it returns or ctx ends,
// its output and errors into out, and gives the command's error.
func execute(ctx context.Context, out io.Writer, args ...string) error {
	root := newRoot()
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}
