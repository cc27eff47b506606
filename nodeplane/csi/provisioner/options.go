package provisioner

import (
	"errors"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"k8s.io/client-go/kubernetes"
)

// Options configures a Provisioner.
type Options struct {
	// Client talks to the cluster's API server. It needs get/list/watch
	// on persistentvolumeclaims, storageclasses and persistentvolumes,
	// create/delete/patch on persistentvolumes, update/patch on
	// persistentvolumeclaims (the library clears selected-node to
	// reschedule) and create/patch on events; get on
	// persistentvolumeclaims and persistentvolumes for clones (their
	// source PVC and its PV). Required.
	Client kubernetes.Interface
	// Snapshots reads VolumeSnapshots and VolumeSnapshotContents (get)
	// for claims restored from a snapshot; nil refuses such claims
	// (InvalidArgument).
	Snapshots snapclientset.Interface
	// Identity, Controller and Node are the driver's CSI services, called
	// in-process: GetPluginInfo (the provisioner name), NodeGetInfo (the
	// node and its topology), CreateVolume and DeleteVolume. Required.
	Identity   csi.IdentityServer
	Controller csi.ControllerServer
	Node       csi.NodeServer
	// SupportsBlock says the driver serves volumeMode Block; claims for
	// block volumes are refused with an event otherwise.
	SupportsBlock bool
	// ResyncPeriod is how often the informers replay every claim and
	// volume (catching anything a watch missed).
	ResyncPeriod time.Duration
	// Threadiness is the number of claim and of volume workers.
	Threadiness int
}

// DefaultOptions returns Options with block support on, a 15-minute
// resync (the library's default) and 2 workers; the client and the CSI
// services are left for the caller.
func DefaultOptions() Options {
	return Options{SupportsBlock: true, ResyncPeriod: 15 * time.Minute, Threadiness: 2}
}

// Validate reports every missing or invalid field, joined.
func (o Options) Validate() error {
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("provisioner: Kubernetes client required"))
	}
	if o.Identity == nil || o.Controller == nil || o.Node == nil {
		errs = append(errs, errors.New("provisioner: the driver's CSI Identity, Controller and Node services are required"))
	}
	if o.ResyncPeriod <= 0 {
		errs = append(errs, errors.New("provisioner: ResyncPeriod must be positive"))
	}
	if o.Threadiness <= 0 {
		errs = append(errs, errors.New("provisioner: Threadiness must be positive"))
	}
	return errors.Join(errs...)
}
