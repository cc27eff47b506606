// Command converge-node runs converge's node agents, one per subcommand:
// the hostpath CSI driver (hostpath-csi, which also registers with the
// kubelet) and its storage pool workers' mounter (hostpath-pool-mounter),
// the VM agent (vm: the virt-handler and virt-launcher roles on
// libvirt) and the libvirtd it talks to (libvirtd), the CNI plugin
// installer (cni-install), bridge-marker and the CDI importer
// (cdi-importer, import). Each agent lives in its own
// package under nodeplane/; this command only parses flags and starts it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// subcommands are added by the files of this package, one per agent, from
// their init functions.
var subcommands []func() *cobra.Command

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "converge-node",
		Short:         "converge's node agents: hostpath CSI driver and pool mounter, VM agent and its libvirtd, CNI install, bridge-marker, CDI importer",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, sub := range subcommands {
		root.AddCommand(sub())
	}
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
