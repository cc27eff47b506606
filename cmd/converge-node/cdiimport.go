package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/converge-dev/converge/nodeplane/cdiimport"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

func init() { subcommands = append(subcommands, newCDIImportCommand) }

// newCDIImportCommand is `converge-node cdi-importer`: the cdi-importer
// node agent (package nodeplane/cdiimport) watching DataVolumes through
// the API server.
func newCDIImportCommand() *cobra.Command {
	opts := cdiimport.DefaultOptions()
	var kubeconfig string
	var pools []string
	cmd := &cobra.Command{
		Use:   "cdi-importer --node-name N --storage-pool NAME=PATH ...",
		Short: "Import DataVolumes (http, blank) into this node's hostpath CSI volumes (the CDI importer role)",
		Long: `cdi-importer labels its Node converge.dev/cdi-importer=true, watches
DataVolumes whose PVC is Bound to a PersistentVolume of the hostpath CSI driver
on this node, and fills the volume: spec.source.http is downloaded, checked
(spec.source.http.checksum), converted to raw with qemu-img and written sparse
to <volume>/data/disk.img (Filesystem) or the volume's disk file (Block);
spec.source.blank becomes a sparse disk.img of the PVC size. It writes the
DataVolume's phase (ImportInProgress, Succeeded, Failed), status.progress,
restartCount and the Running/Ready conditions. --storage-pool must list the
same pools as converge-node hostpath-csi on this node. Needs qemu-img (Debian
qemu-utils).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.NodeName == "" {
				return fmt.Errorf("cdi-importer: --node-name: required")
			}
			if len(pools) == 0 {
				return fmt.Errorf("cdi-importer: --storage-pool: at least one NAME=PATH is required")
			}
			for _, s := range pools {
				p, err := hostpath.ParsePool(s)
				if err != nil {
					return fmt.Errorf("cdi-importer: %w", err)
				}
				opts.Pools = append(opts.Pools, p)
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("cdi-importer: kubeconfig %q: %w", kubeconfig, err)
			}
			ctrl.SetLogger(zap.New(zap.WriteTo(cmd.ErrOrStderr())))
			return cdiimport.Run(cmd.Context(), cfg, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.NodeName, "node-name", "", "this node's Node name")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the API server (default: in-cluster)")
	f.StringArrayVar(&pools, "storage-pool", nil, "storage pool NAME=PATH of the hostpath CSI driver on this node (repeatable; the first is the default)")
	f.StringVar(&opts.DriverName, "driver-name", opts.DriverName, "CSI driver name of the PersistentVolumes to import into")
	f.IntVar(&opts.Retries, "retries", opts.Retries, "reruns of a failed import before the DataVolume is Failed")
	f.DurationVar(&opts.Backoff, "backoff", opts.Backoff, "wait before the first rerun, doubled each time")
	f.DurationVar(&opts.MaxBackoff, "max-backoff", opts.MaxBackoff, "longest wait between reruns")
	f.DurationVar(&opts.StatusInterval, "status-interval", opts.StatusInterval, "minimum time between two status.progress writes")
	f.IntVar(&opts.Concurrency, "concurrency", opts.Concurrency, "imports running at once on this node")
	f.StringVar(&opts.Importer.QemuImg, "qemu-img", opts.Importer.QemuImg, "qemu-img binary")
	return cmd
}
