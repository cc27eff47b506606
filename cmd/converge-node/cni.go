package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/converge-dev/converge/nodeplane/network/bridgemarker"
	"github.com/converge-dev/converge/nodeplane/network/cniplugins"
)

func init() {
	subcommands = append(subcommands, newCNIInstallCommand, newBridgeMarkerCommand)
}

// newCNIInstallCommand is `converge-node cni-install`: the
// kube-cni-linux-bridge-plugin role.
func newCNIInstallCommand() *cobra.Command {
	o := cniplugins.DefaultInstallOptions()
	cmd := &cobra.Command{
		Use:   "cni-install",
		Short: "install the bridge, host-local and loopback CNI plugins into the node's CNI bin directory",
		Long: `cni-install copies the CNI plugins built with converge (containernetworking/plugins)
from --source into --dest, each atomically (temporary file, fsync, rename) and only when
the installed plugin states another version. A broken source is refused before --dest is
touched. It prints one line per plugin.

--source defaults to the cni directory beside the executable when there is one (bin/cni
in a checkout), else /opt/cni/bin, where the converge-node image holds the plugins. In a
container, mount the host's CNI bin directory elsewhere (such as /host/opt/cni/bin) and
pass it as --dest: the same directory as source and destination is refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := cniplugins.Install(cmd.Context(), o)
			for _, r := range res {
				switch {
				case !r.Installed:
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s: up to date in %s\n", r.Name, r.Version, r.Path)
				case r.Previous == "":
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s: installed in %s\n", r.Name, r.Version, r.Path)
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s: installed in %s (was %s)\n", r.Name, r.Version, r.Path, r.Previous)
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&o.Source, "source", o.Source, "directory holding the built plugins (the image's /opt/cni/bin)")
	cmd.Flags().StringVar(&o.Dest, "dest", o.Dest, "the node's CNI bin directory, as mounted in this container")
	cmd.Flags().StringSliceVar(&o.Plugins, "plugins", o.Plugins, "plugins to install")
	return cmd
}

// newBridgeMarkerCommand is `converge-node bridge-marker`.
func newBridgeMarkerCommand() *cobra.Command {
	o := bridgemarker.DefaultMarkerOptions()
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "bridge-marker",
		Short: "publish the node's Linux bridges as bridge.network.kubevirt.io/<bridge> resources on its Node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log.SetLogger(zap.New())
			if o.NodeName == "" {
				o.NodeName = os.Getenv("NODE_NAME")
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("bridge-marker: kubeconfig %q: %w", kubeconfig, err)
			}
			c, err := client.New(cfg, client.Options{})
			if err != nil {
				return err
			}
			m, err := bridgemarker.NewMarker(c, o)
			if err != nil {
				return err
			}
			return m.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.NodeName, "node-name", "", "the Node to mark (default $NODE_NAME)")
	cmd.Flags().StringVar(&o.NetNS, "netns", "", "path of the network namespace to watch (default: the agent's own)")
	cmd.Flags().DurationVar(&o.Resync, "resync", o.Resync, "longest time between two full syncs")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default $KUBECONFIG, else in-cluster)")
	return cmd
}
