package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/nodeplane/csi/provisioner"
	"github.com/converge-dev/converge/nodeplane/csi/registration"
	"github.com/converge-dev/converge/nodeplane/csi/resizer"
	"github.com/converge-dev/converge/nodeplane/csi/snapshotter"
)

func init() { subcommands = append(subcommands, newHostpathCSICommand) }

// newHostpathCSICommand is `converge-node hostpath-csi`: the hostpath CSI
// driver (package nodeplane/csi/hostpath) on a unix socket until SIGTERM,
// and with --provision or --kubeconfig the node's PVC provisioner (package
// nodeplane/csi/provisioner), PVC resizer (nodeplane/csi/resizer) and
// csi-snapshotter (nodeplane/csi/snapshotter) in the same process.
func newHostpathCSICommand() *cobra.Command {
	opts := hostpath.DefaultOptions()
	var pools, mountedPools []string
	var version, provision, register bool
	var kubeconfig, kubeletDir, regSocket, regPath string
	cmd := &cobra.Command{
		Use:   "hostpath-csi --endpoint unix:///path/csi.sock --node-id NAME --storage-pool NAME=PATH...",
		Short: "Run the hostpath CSI driver (the hostpath-provisioner's CSI plugin)",
		Long: `Run the hostpath CSI driver: CSI Identity, Controller and Node services on a
unix socket, for volumes kept as directories (filesystem) or sparse files on
loop devices (block) in the storage pools given with --storage-pool, in
order (the first is the default pool). Needs root for bind mounts and loop
devices. Stops on SIGTERM or SIGINT.

With --provision (or --kubeconfig) it also provisions PersistentVolumes for
PVCs of StorageClasses whose provisioner is the driver name, when the PVC's
volume.kubernetes.io/selected-node is this node (WaitForFirstConsumer; the
role of csi-provisioner --node-deployment next to upstream HPP's plugin),
and deletes the Released PVs of this node with reclaim policy Delete. PVCs
whose dataSource is a PVC are CSI clones of it (on the source's node only).
It also expands this node's volumes when a Bound PVC asks for more storage
(the role of csi-resizer), node step included, in the same process, and
takes this node's volume snapshots: upstream csi-snapshotter's controller
(--node-deployment) on the VolumeSnapshotContents labelled
snapshot.storage.kubernetes.io/managed-by with this node, calling the
driver through its socket; PVCs whose dataSource is a VolumeSnapshot are
restored from it.
Without --kubeconfig it uses $KUBECONFIG, else the in-cluster config.

With --kubelet-registration it also registers the driver with the kubelet,
as node-driver-registrar does: it serves the kubelet plugin registration API
on --registration-socket (default <kubelet-dir>/plugins_registry/<driver>-reg.sock),
giving the kubelet --kubelet-registration-path (default the --endpoint path,
which defaults to unix://<kubelet-dir>/plugins/<driver>/csi.sock) as the CSI
endpoint. The kubelet's refusal ends the command with its error (the
container restarts and registers again). Both sockets are removed at exit.`,
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
		mounted:
			for _, name := range mountedPools {
				for i := range opts.Pools {
					if opts.Pools[i].Name == name {
						opts.Pools[i].Mounted = true
						continue mounted
					}
				}
				return fmt.Errorf("--mounted-pool %q: no --storage-pool of that name", name)
			}
			if opts.NodeID == "" {
				opts.NodeID = os.Getenv("NODE_NAME")
			}
			var reg *registration.Options
			if register {
				if !filepath.IsAbs(kubeletDir) {
					return fmt.Errorf("hostpath-csi: --kubelet-dir %q: expected an absolute path", kubeletDir)
				}
				if opts.Endpoint == "" {
					opts.Endpoint = "unix://" + registration.EndpointPath(kubeletDir, opts.DriverName)
				}
				ro := registration.DefaultOptions(opts.DriverName, kubeletDir)
				if regSocket != "" {
					ro.Socket = regSocket
				}
				ro.Endpoint = regPath
				if regPath == "" {
					path, err := hostpath.SocketPath(opts.Endpoint)
					if err != nil {
						return fmt.Errorf("hostpath-csi: %w", err)
					}
					ro.Endpoint = path
				}
				if err := ro.Validate(); err != nil {
					return fmt.Errorf("hostpath-csi: %w", err)
				}
				reg = &ro
			} else if regSocket != "" || regPath != "" {
				return fmt.Errorf("hostpath-csi: --registration-socket and --kubelet-registration-path need --kubelet-registration")
			}
			var cs *apiClients
			if provision || kubeconfig != "" {
				if kubeconfig == "" {
					kubeconfig = os.Getenv("KUBECONFIG")
				}
				cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
				if err != nil {
					return fmt.Errorf("hostpath-csi: kubeconfig %q: %w", kubeconfig, err)
				}
				cs = &apiClients{node: opts.NodeID}
				if cs.kube, err = kubernetes.NewForConfig(cfg); err != nil {
					return fmt.Errorf("hostpath-csi: kubeconfig %q: %w", kubeconfig, err)
				}
				if cs.snapshots, err = snapclientset.NewForConfig(cfg); err != nil {
					return fmt.Errorf("hostpath-csi: kubeconfig %q: %w", kubeconfig, err)
				}
			}
			d, err := hostpath.New(opts)
			if err != nil {
				return err
			}
			defer d.Close()
			return serveHostpath(cmd.Context(), d, cs, reg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Endpoint, "endpoint", "", "CSI endpoint, unix:///path/csi.sock (required)")
	f.StringVar(&opts.NodeID, "node-id", "", "this node's name, the topology value of its volumes (default $NODE_NAME)")
	f.StringVar(&opts.DriverName, "driver-name", opts.DriverName, "CSI driver name")
	f.StringArrayVar(&pools, "storage-pool", nil, "storage pool NAME=PATH, repeatable; the first is the default")
	f.StringArrayVar(&mountedPools, "mounted-pool", nil, "NAME of a --storage-pool whose PATH another process mounts (a pvcTemplate pool's worker): nothing is created there and the pool is served once PATH is a mount point; repeatable")
	f.BoolVar(&version, "version", false, "print the driver version and exit")
	f.BoolVar(&provision, "provision", false, "also provision PVs for this node's PVCs (in-cluster config unless --kubeconfig)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the API server to provision against; implies --provision (default $KUBECONFIG, else in-cluster)")
	f.BoolVar(&register, "kubelet-registration", false, "register the driver with the kubelet through its plugin registration socket (node-driver-registrar's role)")
	f.StringVar(&kubeletDir, "kubelet-dir", "/var/lib/kubelet", "the kubelet's root directory, for the default --endpoint and --registration-socket")
	f.StringVar(&regSocket, "registration-socket", "", "registration socket the kubelet's plugin watcher finds (default <kubelet-dir>/plugins_registry/<driver>-reg.sock)")
	f.StringVar(&regPath, "kubelet-registration-path", "", "the CSI socket's path as the kubelet sees it on the host (default the --endpoint path)")
	return cmd
}

// apiClients are the API clients of the driver's controllers and the node
// they run for.
type apiClients struct {
	kube      kubernetes.Interface
	snapshots snapclientset.Interface
	node      string
}

// serveHostpath serves d until ctx is done and, when cs is not nil, runs
// its provisioner, its resizer and its csi-snapshotter (connected to the
// driver's socket) beside it, and when reg is not nil, once the CSI socket
// listens, the kubelet registration; any of them stopping stops all, and
// a refused registration is the error.
func serveHostpath(ctx context.Context, d *hostpath.Driver, cs *apiClients, reg *registration.Options) error {
	lis, err := d.Listen()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	snapErr := make(chan error, 1)
	if cs != nil {
		po := provisioner.DefaultOptions()
		po.Client, po.Snapshots, po.Identity, po.Controller, po.Node = cs.kube, cs.snapshots, d.Identity(), d.Controller(), d.Node()
		p, err := provisioner.New(ctx, po)
		if err != nil {
			lis.Close()
			return err
		}
		wg.Go(func() { defer cancel(); p.Run(ctx) })
		ro := resizer.DefaultOptions()
		ro.Client, ro.Identity, ro.Controller, ro.Node = cs.kube, d.Identity(), d.Controller(), d.Node()
		r, err := resizer.New(ctx, ro)
		if err != nil {
			cancel()
			wg.Wait()
			lis.Close()
			return err
		}
		wg.Go(func() { defer cancel(); r.Run(ctx) })
		// The sidecar talks to the driver through its socket, as
		// csi-snapshotter does; the driver starts serving it below.
		conn, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			cancel()
			wg.Wait()
			lis.Close()
			return fmt.Errorf("hostpath-csi: snapshotter: %w", err)
		}
		defer conn.Close()
		wg.Go(func() {
			defer cancel()
			so := snapshotter.DefaultOptions()
			so.Client, so.Snapshots, so.Conn, so.NodeName = cs.kube, cs.snapshots, conn, cs.node
			s, err := snapshotter.New(ctx, so)
			if err != nil {
				if ctx.Err() == nil {
					snapErr <- err
				}
				return
			}
			s.Run(ctx)
		})
	}
	regErr := make(chan error, 1)
	if reg != nil {
		wg.Go(func() {
			defer cancel()
			regErr <- registration.Serve(ctx, *reg)
		})
	}
	err = d.ServeListener(ctx, lis)
	cancel()
	wg.Wait()
	select {
	case rerr := <-regErr:
		if rerr != nil {
			return fmt.Errorf("hostpath-csi: %w", rerr)
		}
	default:
	}
	select {
	case serr := <-snapErr:
		return fmt.Errorf("hostpath-csi: %w", serr)
	default:
	}
	return err
}
