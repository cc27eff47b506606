package snapshotcontroller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapscheme "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/scheme"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	common "github.com/kubernetes-csi/external-snapshotter/v8/pkg/common-controller"
	"github.com/kubernetes-csi/external-snapshotter/v8/pkg/metrics"
	"k8s.io/apimachinery/pkg/runtime"
	coreinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-dev/converge/internal/crdwait"
)

// CRDs are the CRDs the controller needs established before it starts
// (the snapshot.storage.k8s.io v1 ones, as upstream's main checks with
// ensureCustomResourceDefinitionsExist).
var CRDs = []string{
	"volumesnapshotclasses.snapshot.storage.k8s.io",
	"volumesnapshotcontents.snapshot.storage.k8s.io",
	"volumesnapshots.snapshot.storage.k8s.io",
}

// Options configure Setup; the defaults are snapshot-controller's flags'
// (cmd/snapshot-controller main.go v8.4.0).
type Options struct {
	// Gate, when set, holds the controller back until it gives nil: the
	// HostPathProvisioner operator's snapshot-controller role
	// (operand.Gates.Wait), open once a native HostPathProvisioner exists.
	Gate func(ctx context.Context) error
	// CRDPoll is how often the CRDs are looked for before the start.
	CRDPoll time.Duration
	// ResyncPeriod is how often the informers replay everything
	// (--resync-period, 15 min).
	ResyncPeriod time.Duration
	// Threadiness is the number of snapshot and of content workers
	// (--worker-threads; upstream's 10, here 2).
	Threadiness int
	// RetryMin and RetryMax bound each object's exponential backoff
	// (--retry-interval-start 1 s, --retry-interval-max 5 min).
	RetryMin, RetryMax time.Duration
}

// DefaultOptions gives snapshot-controller's defaults with 2 workers and
// a CRD poll of 2 s; no gate.
func DefaultOptions() Options {
	return Options{CRDPoll: 2 * time.Second, ResyncPeriod: 15 * time.Minute, Threadiness: 2, RetryMin: time.Second, RetryMax: 5 * time.Minute}
}

// Validate reports every invalid field, joined.
func (o Options) Validate() error {
	var errs []error
	if o.CRDPoll <= 0 || o.ResyncPeriod <= 0 {
		errs = append(errs, errors.New("snapshotcontroller: CRDPoll and ResyncPeriod must be positive"))
	}
	if o.Threadiness <= 0 {
		errs = append(errs, errors.New("snapshotcontroller: Threadiness must be positive"))
	}
	if o.RetryMin <= 0 || o.RetryMax < o.RetryMin {
		errs = append(errs, errors.New("snapshotcontroller: need 0 < RetryMin <= RetryMax"))
	}
	return errors.Join(errs...)
}

// schemeOnce adds the snapshot types to client-go's scheme, so the
// controller's events can name VolumeSnapshots (upstream's main does it
// at start).
var schemeOnce sync.Once

// Setup adds the snapshot controller to mgr as a leader-only runnable: it
// waits for CRDs, then for opts.Gate, then runs upstream's common
// controller with clients made from mgr's config until the manager stops.
func Setup(mgr manager.Manager, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	log := ctrl.Log.WithName("snapshot-controller")
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !crdwait.Wait(ctx, mgr.GetAPIReader(), opts.CRDPoll, CRDs...) {
			return nil
		}
		if opts.Gate != nil {
			log.Info("snapshot CRDs established; waiting for a native HostPathProvisioner")
			if err := opts.Gate(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("snapshot-controller: %w", err)
			}
		}
		log.Info("starting the snapshot controller")
		return run(ctx, mgr, opts)
	}))
}

// run builds the clients and informers as upstream's main does and runs
// the common controller until ctx ends.
func run(ctx context.Context, mgr manager.Manager, opts Options) error {
	var err error
	schemeOnce.Do(func() { err = snapscheme.AddToScheme(scheme.Scheme) })
	if err != nil {
		return fmt.Errorf("snapshot-controller: %w", err)
	}
	coreCfg := *mgr.GetConfig()
	coreCfg.ContentType = runtime.ContentTypeProtobuf
	kube, err := kubernetes.NewForConfig(&coreCfg)
	if err != nil {
		return fmt.Errorf("snapshot-controller: %w", err)
	}
	snaps, err := snapclientset.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("snapshot-controller: %w", err)
	}
	f := snapinformers.NewSharedInformerFactory(snaps, opts.ResyncPeriod)
	core := coreinformers.NewSharedInformerFactory(kube, opts.ResyncPeriod)
	limiter := func() workqueue.TypedRateLimiter[string] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.RetryMin, opts.RetryMax)
	}
	c := common.NewCSISnapshotCommonController(
		snaps, kube,
		f.Snapshot().V1().VolumeSnapshots(),
		f.Snapshot().V1().VolumeSnapshotContents(),
		f.Snapshot().V1().VolumeSnapshotClasses(),
		nil, nil, nil, // volume group snapshots: off
		core.Core().V1().PersistentVolumeClaims(),
		core.Core().V1().PersistentVolumes(),
		core.Core().V1().Nodes(),
		metrics.NewMetricsManager(),
		opts.ResyncPeriod,
		limiter(), limiter(), limiter(), limiter(),
		true,  // enableDistributedSnapshotting
		true,  // preventVolumeModeConversion
		false, // enableVolumeGroupSnapshots
	)
	f.Start(ctx.Done())
	core.Start(ctx.Done())
	defer f.Shutdown()
	defer core.Shutdown()
	c.Run(opts.Threadiness, ctx.Done(), nil)
	return nil
}
