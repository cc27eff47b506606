package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newVersion(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the converge version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Fprintf(g.stdout, "converge %s\n", Version)
		},
	}
}
