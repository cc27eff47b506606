package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

func init() { subcommands = append(subcommands, newHostpathCSICommand) }

// newHostpathCSICommand is `converge-node hostpath-csi`: the hostpath CSI
// driver (package nodeplane/csi/hostpath) on a unix socket until SIGTERM.
func newHostpathCSICommand() *cobra.Command {
	opts := hostpath.DefaultOptions()
	var pools []string
	var version bool
	cmd := &cobra.Command{
		Use:   "hostpath-csi --endpoint unix:///path/csi.sock --node-id NAME --storage-pool NAME=PATH...",
		Short: "Run the hostpath CSI driver (the hostpath-provisioner's CSI plugin)",
		Long: `Run the hostpath CSI driver: CSI Identity, Controller and Node services on a
unix socket, for volumes kept as directories (filesystem) or sparse files on
loop devices (block) in the storage pools given with --storage-pool, in
order (the first is the default pool). Needs root for bind mounts and loop
devices. Stops on SIGTERM or SIGINT.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if version {
				fmt.Fprintf(cmd.OutOrStdout(), "converge-node hostpath-csi %s\n", hostpath.Version)
				return nil
			}
			for _, s := range pools {
				p, err := hostpath.ParsePool(s)
				if err != nil {
					return fmt.Errorf("--storage-pool: %w", err)
				}
				opts.Pools = append(opts.Pools, p)
			}
			if opts.NodeID == "" {
				opts.NodeID = os.Getenv("NODE_NAME")
			}
			d, err := hostpath.New(opts)
			if err != nil {
				return err
			}
			defer d.Close()
			return d.Serve(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Endpoint, "endpoint", "", "CSI endpoint, unix:///path/csi.sock (required)")
	f.StringVar(&opts.NodeID, "node-id", "", "this node's name, the topology value of its volumes (default $NODE_NAME)")
	f.StringVar(&opts.DriverName, "driver-name", opts.DriverName, "CSI driver name")
	f.StringArrayVar(&pools, "storage-pool", nil, "storage pool NAME=PATH, repeatable; the first is the default")
	f.BoolVar(&version, "version", false, "print the driver version and exit")
	return cmd
}
