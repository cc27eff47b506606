package snapshotter

import (
	"context"
	"fmt"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapscheme "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/scheme"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	sidecar "github.com/kubernetes-csi/external-snapshotter/v8/pkg/sidecar-controller"
	upstream "github.com/kubernetes-csi/external-snapshotter/v8/pkg/snapshotter"
	"github.com/kubernetes-csi/external-snapshotter/v8/pkg/utils"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
)

// ManagedByLabel is the label the snapshot controller puts on a
// VolumeSnapshotContent naming the node whose sidecar takes it
// (external-snapshotter pkg/utils VolumeSnapshotContentManagedByLabel).
const ManagedByLabel = utils.VolumeSnapshotContentManagedByLabel

// schemeOnce adds the snapshot types to client-go's scheme, so the
// sidecar's events can name VolumeSnapshotContents (upstream's main does
// it at start).
var schemeOnce sync.Once

// Snapshotter is one node's csi-snapshotter.
type Snapshotter struct {
	opts   Options
	driver string
}

// New checks opts and asks the driver behind opts.Conn its name
// (GetPluginInfo) and whether it serves CREATE_DELETE_SNAPSHOT, as
// csi-snapshotter does at start; a driver that does not is an error.
func New(ctx context.Context, opts Options) (*Snapshotter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	ready := grpc.WaitForReady(true) // the driver may not serve its socket yet
	info, err := csi.NewIdentityClient(opts.Conn).GetPluginInfo(cctx, &csi.GetPluginInfoRequest{}, ready)
	if err != nil {
		return nil, fmt.Errorf("snapshotter: CSI GetPluginInfo: %w", err)
	}
	caps, err := csi.NewControllerClient(opts.Conn).ControllerGetCapabilities(cctx, &csi.ControllerGetCapabilitiesRequest{}, ready)
	if err != nil {
		return nil, fmt.Errorf("snapshotter: driver %s: CSI ControllerGetCapabilities: %w", info.GetName(), err)
	}
	for _, c := range caps.GetCapabilities() {
		if c.GetRpc().GetType() == csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT {
			return &Snapshotter{opts: opts, driver: info.GetName()}, nil
		}
	}
	return nil, fmt.Errorf("snapshotter: CSI driver %s does not support CREATE_DELETE_SNAPSHOT", info.GetName())
}

// Driver is the driver's name, the VolumeSnapshotContents' spec.driver
// the sidecar takes.
func (s *Snapshotter) Driver() string { return s.driver }

// Run runs upstream's sidecar controller on this node's
// VolumeSnapshotContents until ctx is done. It blocks.
func (s *Snapshotter) Run(ctx context.Context) {
	schemeOnce.Do(func() { utilruntimeMust(snapscheme.AddToScheme(scheme.Scheme)) })
	o := s.opts
	classes := snapinformers.NewSharedInformerFactory(o.Snapshots, o.ResyncPeriod)
	contents := snapinformers.NewSharedInformerFactoryWithOptions(o.Snapshots, o.ResyncPeriod,
		snapinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = labels.Set{ManagedByLabel: o.NodeName}.AsSelector().String()
		}))
	ctrl := sidecar.NewCSISnapshotSideCarController(
		o.Snapshots, o.Client, s.driver,
		contents.Snapshot().V1().VolumeSnapshotContents(),
		classes.Snapshot().V1().VolumeSnapshotClasses(),
		upstream.NewSnapshotter(o.Conn), nil,
		o.Timeout, o.ResyncPeriod, o.NamePrefix, o.NameUUIDLength, "groupsnapshot", -1,
		false,
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.RetryMin, o.RetryMax),
		false, nil, nil,
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.RetryMin, o.RetryMax),
	)
	contents.Start(ctx.Done())
	classes.Start(ctx.Done())
	defer contents.Shutdown()
	defer classes.Shutdown()
	ctrl.Run(o.Threadiness, ctx.Done(), nil)
}

// utilruntimeMust panics on err: adding fixed, generated types to a
// scheme fails only on a programming error.
func utilruntimeMust(err error) {
	if err != nil {
		panic(err)
	}
}
