// Command benchtable prints issue 18's table from `make bench`'s output:
// `benchtable FILE...` reads the Go benchmark result lines of each FILE
// (other lines are skipped) and prints, as Markdown, each figure next to
// the floor or anchor measured in the same run, the ratio, the goal and
// whether it is met (internal/bench/summary). A result line it cannot
// parse fails with its file and line.
package main

import (
	"fmt"
	"os"

	"github.com/converge-dev/converge/internal/bench/summary"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchtable FILE...")
		os.Exit(2)
	}
	res := summary.Results{}
	for _, name := range os.Args[1:] {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
		err = summary.Read(res, f, name)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
	}
	fmt.Print(summary.Table(summary.Rows(res)))
}
