package cluster

import (
	"io"
	"time"
)

// Fixed addresses of the one cluster a machine runs (see the package doc).
const (
	// NodeIP is the node's InternalIP and the apiserver's advertise and
	// bind address: a /32 added to lo.
	NodeIP = "10.250.0.1"
	// ServiceCIDR is the service network, which kube-proxy routes.
	ServiceCIDR = "10.96.0.0/24"
	// KubernetesServiceIP is the `kubernetes` Service's ClusterIP (the
	// first of ServiceCIDR), in the apiserver's serving certificate.
	KubernetesServiceIP = "10.96.0.1"
	// PodCIDR is the pod network of the CNI bridge (host-local IPAM).
	PodCIDR = "10.244.0.0/24"
	// BridgeName is the Linux bridge of the pod network.
	BridgeName = "cvg-cluster0"
	// NetworkName is the CNI network name of the pod network.
	NetworkName = "converge-cluster"
	// APIServerPort is kube-apiserver's secure port on NodeIP, also the
	// `kubernetes` Service's port.
	APIServerPort = 443
	// EtcdPort and etcdPeerPort are etcd's client and peer ports on NodeIP.
	EtcdPort     = 2379
	etcdPeerPort = 2380
	// ControllerManagerPort, SchedulerPort, KubeletPort and
	// KubeletHealthzPort are the components' usual ports, on NodeIP.
	ControllerManagerPort = 10257
	SchedulerPort         = 10259
	// ProxyMetricsPort and ProxyHealthzPort are kube-proxy's, on NodeIP.
	ProxyMetricsPort   = 10249
	ProxyHealthzPort   = 10256
	KubeletPort        = 10250
	KubeletHealthzPort = 10248
	// LockDir holds the machine-wide lock and owner record, and
	// containerd's state directory.
	LockDir = "/run/converge-cluster"
	// PauseImage is the sandbox image reference: Kubernetes' pause built
	// from its source (BuildPauseImage) and imported at every start.
	PauseImage = "localhost/converge/pause:1"
	// DefaultKubeletRootDir is the kubelet's usual root directory, where
	// upstream DaemonSets (CSI node plugins) expect it.
	DefaultKubeletRootDir = "/var/lib/kubelet"
	// DefaultNodeName is the node's name unless Options.NodeName says
	// otherwise.
	DefaultNodeName = "converge-node-0"
)

// Options configure Start. Make them with DefaultOptions.
type Options struct {
	// Dir is the cluster's work directory (certificates, kubeconfigs,
	// etcd's data, containerd's root, CNI configuration, logs). Empty: a
	// new directory under os.TempDir(), removed by Stop. A given
	// directory is created if missing and its contents replaced; Stop
	// empties it (keeping logs/ when KeepLogs is set).
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubelet and cni/{bridge,host-local,loopback}. Empty:
	// controlplane.BinDir() (the repository's bin/ or
	// $KUBEBUILDER_ASSETS).
	BinDir string
	// NodeName is the node's name (default DefaultNodeName).
	NodeName string
	// KubeletRootDir is the kubelet's --root-dir (default
	// DefaultKubeletRootDir). Start refuses a non-empty directory it did
	// not create.
	KubeletRootDir string
	// Detach lets the cluster's processes outlive the process calling
	// Start (`make cluster`); otherwise they are killed when it dies, and
	// the next Start or StopRunning cleans up what remains.
	Detach bool
	// KeepLogs keeps Dir/logs when Stop removes the rest of Dir.
	KeepLogs bool
	// LockWait is how long Start waits while another process's cluster
	// holds the lock (tests of other packages running at the same time)
	// before failing; 0 fails at once. A detached cluster (`make
	// cluster`) is never waited for.
	LockWait time.Duration
	// Timeout bounds Start once it holds the lock (default 3 minutes).
	Timeout time.Duration
	// Progress receives one line per step ("cluster: etcd healthy
	// after 0.4s"); nil discards them.
	Progress io.Writer
}

// DefaultOptions gives Options with every default filled in except Dir and
// BinDir, which Start resolves.
func DefaultOptions() Options {
	return Options{
		NodeName:       DefaultNodeName,
		KubeletRootDir: DefaultKubeletRootDir,
		Timeout:        3 * time.Minute,
	}
}

// withDefaults fills the zero fields of o from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.NodeName == "" {
		o.NodeName = d.NodeName
	}
	if o.KubeletRootDir == "" {
		o.KubeletRootDir = d.KubeletRootDir
	}
	if o.Timeout == 0 {
		o.Timeout = d.Timeout
	}
	return o
}
