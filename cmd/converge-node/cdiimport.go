package main

import (
	"fmt"
	"net"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/cdi/uploadserver"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

func init() { subcommands = append(subcommands, newCDIImportCommand) }

// newCDIImportCommand is `converge-node cdi-importer`: the cdi-importer
// node agent (package nodeplane/cdi/importcontroller) watching DataVolumes
// through the API server, with the node's upload server
// (nodeplane/cdi/uploadserver) in the same process unless
// --upload-bind-address is empty.
func newCDIImportCommand() *cobra.Command {
	opts := importcontroller.DefaultOptions()
	up := uploadserver.DefaultOptions(opts)
	keysNamespace := up.PublicKeys.Namespace
	var kubeconfig string
	var pools []string
	cmd := &cobra.Command{
		Use:   "cdi-importer --node-name N --storage-pool NAME=PATH ...",
		Short: "Import and receive uploads of DataVolumes (http, registry, blank, upload) into this node's hostpath CSI volumes (the CDI importer and upload server roles)",
		Long: `cdi-importer labels its Node converge.dev/cdi-importer=true, watches
DataVolumes whose PVC is Bound to a PersistentVolume of the hostpath CSI driver
on this node, and fills the volume: spec.source.http is downloaded, checked
(spec.source.http.checksum), converted to raw with qemu-img and written sparse
to <volume>/data/disk.img (Filesystem) or the volume's disk file (Block);
spec.source.registry pulls the containerDisk image (docker://, or
oci-archive:// in --oci-archive-dir) and imports its one file under /disk/ the
same way; spec.source.blank becomes a sparse disk.img of the PVC size. It writes the
DataVolume's phase (ImportInProgress, Succeeded, Failed), status.progress,
restartCount and the Running/Ready conditions.

In the same process it serves uploads (spec.source.upload, CDI's
cdi-uploadserver role) over HTTPS on --upload-bind-address (default :8187;
empty disables): it moves an upload DataVolume whose PVC is Bound on this node
to UploadReady, publishes its address (--upload-advertise-address, else the
Node's InternalIP with the bound port) and certificate fingerprint on the
Node, checks each upload's token against the public keys ConfigMap
converge-upload-token-public-keys in --upload-keys-namespace (the namespace
of converge-controller, which issues the tokens), and streams the body
through the importer (qcow2 converted to raw) into disk.img. Use
` + "`converge image-upload dv`" + ` to upload.

--storage-pool must list the same pools as converge-node hostpath-csi on this
node. Needs qemu-img (Debian qemu-utils).`,
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
			if up.BindAddress != "" {
				if _, _, err := net.SplitHostPort(up.BindAddress); err != nil {
					return fmt.Errorf("cdi-importer: --upload-bind-address %q: expected host:port or :port (empty disables uploads): %w", up.BindAddress, err)
				}
				if up.AdvertiseAddress != "" {
					if _, _, err := net.SplitHostPort(up.AdvertiseAddress); err != nil {
						return fmt.Errorf("cdi-importer: --upload-advertise-address %q: expected host:port: %w", up.AdvertiseAddress, err)
					}
				}
				if keysNamespace == "" {
					return fmt.Errorf("cdi-importer: --upload-keys-namespace: required with an upload server (converge-controller's namespace)")
				}
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("cdi-importer: kubeconfig %q: %w", kubeconfig, err)
			}
			log := zap.New(zap.WriteTo(cmd.ErrOrStderr()))
			ctrl.SetLogger(log)
			if keysNamespace != "" {
				opts.CloneKeys = up.PublicKeys
				opts.CloneKeys.Namespace = keysNamespace
			}
			if up.BindAddress != "" {
				uo := up
				uo.Volumes = opts
				uo.PublicKeys.Namespace = keysNamespace
				uo.Log = log.WithName("cdi-upload")
				opts.Setups = append(opts.Setups, func(mgr ctrl.Manager) error { return uploadserver.Setup(mgr, uo) })
			}
			return importcontroller.Run(cmd.Context(), cfg, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.NodeName, "node-name", "", "this node's Node name")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the API server (default: in-cluster)")
	f.StringArrayVar(&pools, "storage-pool", nil, "storage pool NAME=PATH of the hostpath CSI driver on this node (repeatable; the first is the default)")
	f.StringVar(&opts.DriverName, "driver-name", opts.DriverName, "CSI driver name of the PersistentVolumes to import into")
	f.StringArrayVar(&opts.InsecureRegistries, "insecure-registry", nil, "registry host[:port] of spec.source.registry URLs pulled over plain HTTP or unverified HTTPS (repeatable; the CDI CR's spec.config.insecureRegistries)")
	f.StringVar(&opts.OCIArchiveDir, "oci-archive-dir", "", "directory oci-archive:// registry sources are read in (empty: refused)")
	f.IntVar(&opts.Retries, "retries", opts.Retries, "reruns of a failed import before the DataVolume is Failed")
	f.DurationVar(&opts.Backoff, "backoff", opts.Backoff, "wait before the first rerun, doubled each time")
	f.DurationVar(&opts.MaxBackoff, "max-backoff", opts.MaxBackoff, "longest wait between reruns")
	f.DurationVar(&opts.StatusInterval, "status-interval", opts.StatusInterval, "minimum time between two status.progress writes")
	f.IntVar(&opts.Concurrency, "concurrency", opts.Concurrency, "imports running at once on this node")
	f.StringVar(&opts.Importer.QemuImg, "qemu-img", opts.Importer.QemuImg, "qemu-img binary")
	f.StringVar(&up.BindAddress, "upload-bind-address", up.BindAddress, "host:port of the HTTPS upload server (empty: no upload server)")
	f.StringVar(&up.AdvertiseAddress, "upload-advertise-address", "", "host:port clients dial for uploads, published on the Node (default: the Node's InternalIP and the bound port)")
	f.StringVar(&keysNamespace, "upload-keys-namespace", keysNamespace, "namespace of the token public keys ConfigMap "+uploadtoken.PublicKeysName+" (converge-controller's namespace): upload tokens and the clone tokens of clones from another namespace are checked against it")
	return cmd
}
