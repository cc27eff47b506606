package snapshotter

import (
	"errors"
	"time"

	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"google.golang.org/grpc"
	"k8s.io/client-go/kubernetes"
)

// Options configures a Snapshotter; the defaults are csi-snapshotter's
// flags' (cmd/csi-snapshotter main.go v8.4.0).
type Options struct {
	// Client writes the sidecar's Events (create, patch). Required.
	Client kubernetes.Interface
	// Snapshots reads VolumeSnapshotClasses (list, watch) and this
	// node's VolumeSnapshotContents (list, watch, get) and writes them
	// (patch; status: patch, update). Required.
	Snapshots snapclientset.Interface
	// Conn is a gRPC connection to the driver's CSI socket (the sidecar's
	// --csi-address). Required.
	Conn *grpc.ClientConn
	// NodeName is this node's name: only the contents labelled
	// snapshot.storage.kubernetes.io/managed-by with it are handled
	// (--node-deployment with NODE_NAME). Required.
	NodeName string
	// Timeout bounds each CSI call (--timeout, default 1 min).
	Timeout time.Duration
	// ResyncPeriod is how often the informers replay every content
	// (--resync-period, default 15 min).
	ResyncPeriod time.Duration
	// Threadiness is the number of content workers (--worker-threads;
	// upstream's default 10, here 2: one node's snapshots).
	Threadiness int
	// NamePrefix and NameUUIDLength make the CSI snapshot name from the
	// VolumeSnapshot's UID (--snapshot-name-prefix "snapshot",
	// --snapshot-name-uuid-length -1: the whole UID).
	NamePrefix     string
	NameUUIDLength int
	// RetryMin and RetryMax bound the per-content exponential backoff
	// of failed creations and deletions (--retry-interval-start 1 s,
	// --retry-interval-max 5 min).
	RetryMin, RetryMax time.Duration
}

// DefaultOptions gives csi-snapshotter's defaults with 2 workers; the
// clients, the connection and the node are left for the caller.
func DefaultOptions() Options {
	return Options{Timeout: time.Minute, ResyncPeriod: 15 * time.Minute, Threadiness: 2,
		NamePrefix: "snapshot", NameUUIDLength: -1, RetryMin: time.Second, RetryMax: 5 * time.Minute}
}

// Validate reports every missing or invalid field, joined.
func (o Options) Validate() error {
	var errs []error
	if o.Client == nil || o.Snapshots == nil {
		errs = append(errs, errors.New("snapshotter: Kubernetes and snapshot.storage.k8s.io clients required"))
	}
	if o.Conn == nil {
		errs = append(errs, errors.New("snapshotter: a gRPC connection to the driver's CSI socket is required"))
	}
	if o.NodeName == "" {
		errs = append(errs, errors.New("snapshotter: NodeName required (the node whose VolumeSnapshotContents it handles)"))
	}
	if o.Timeout <= 0 || o.ResyncPeriod <= 0 {
		errs = append(errs, errors.New("snapshotter: Timeout and ResyncPeriod must be positive"))
	}
	if o.Threadiness <= 0 {
		errs = append(errs, errors.New("snapshotter: Threadiness must be positive"))
	}
	if o.NamePrefix == "" {
		errs = append(errs, errors.New("snapshotter: NamePrefix must not be empty"))
	}
	if o.RetryMin <= 0 || o.RetryMax < o.RetryMin {
		errs = append(errs, errors.New("snapshotter: need 0 < RetryMin <= RetryMax"))
	}
	return errors.Join(errs...)
}
