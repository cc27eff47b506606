package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/converge-dev/converge/nodeplane/csi/poolmount"
)

func init() { subcommands = append(subcommands, newHostpathPoolMounterCommand) }

// newHostpathPoolMounterCommand is `converge-node hostpath-pool-mounter`:
// the mounter container of a HostPathProvisioner storage pool worker
// (package nodeplane/csi/poolmount), which keeps the pool's PVC mounted at
// <pool path>/csi on the host until SIGTERM, as hostpath-provisioner-
// operator's cmd/mounter does (--storagePoolPath, --mountPath).
func newHostpathPoolMounterCommand() *cobra.Command {
	o := poolmount.DefaultOptions()
	o.Source = "/source"
	cmd := &cobra.Command{
		Use:   "hostpath-pool-mounter --source /source --target <pool path>/csi",
		Short: "Keep a hostpath storage pool's PVC bind-mounted on the host (a pool worker's mounter)",
		Long: `hostpath-pool-mounter bind-mounts --source (the storage pool's PVC, mounted into
the container by the kubelet; it must be a mount point) onto --target (created
when missing; its parent should be the pool's host path, mounted into the
container with Bidirectional propagation, so that the mount shows on the
host, where the hostpath CSI driver keeps the pool's volumes). A target that
already shows the source is kept; anything else mounted there is unmounted
first. Every --interval it checks the target still shows the source and
binds it again if not. On SIGTERM or SIGINT it unmounts the target (lazily
when busy) and exits 0. Needs root (CAP_SYS_ADMIN). Filesystem volumes only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return fmt.Errorf("hostpath-pool-mounter: %w", err)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)).With("component", "converge-node hostpath-pool-mounter")
			logf := func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
			if err := poolmount.Keep(cmd.Context(), o, logf); err != nil {
				return fmt.Errorf("hostpath-pool-mounter: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Source, "source", o.Source, "the PVC's mount point in the container: the directory to show at --target")
	f.StringVar(&o.Target, "target", o.Target, "where --source is bind-mounted: <pool path>/csi, under the pool's host path mounted with Bidirectional propagation")
	f.DurationVar(&o.Interval, "interval", o.Interval, "how often the mount is checked and bound again when gone")
	return cmd
}
