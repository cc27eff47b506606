// Command converge checks, renders, diffs and applies a HyperConverged
// config: see `converge --help`.
package main

import (
	"os"

	"github.com/converge-dev/converge/internal/cli"
)

func main() { os.Exit(cli.Main()) }
