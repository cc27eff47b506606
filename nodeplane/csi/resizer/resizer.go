package resizer

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Resizer expands the PVCs of one node's CSI driver (see the package
// comment).
type Resizer struct {
	opts     Options
	driver   string
	nodeID   string
	segments map[string]string

	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	events  record.EventRecorder
}

// New validates opts and asks the driver for its name (GetPluginInfo) and
// its node's topology (NodeGetInfo), which must not be empty.
func New(ctx context.Context, opts Options) (*Resizer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	info, err := opts.Identity.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("resizer: CSI GetPluginInfo: %w", err)
	}
	node, err := opts.Node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("resizer: driver %s: CSI NodeGetInfo: %w", info.GetName(), err)
	}
	segs := node.GetAccessibleTopology().GetSegments()
	if len(segs) == 0 {
		return nil, fmt.Errorf("resizer: driver %s on node %s reports no accessible topology; a node-local resizer needs one to find its volumes", info.GetName(), node.GetNodeId())
	}
	return &Resizer{opts: opts, driver: info.GetName(), nodeID: node.GetNodeId(), segments: segs}, nil
}

// Name is the driver name.
func (r *Resizer) Name() string { return r.driver }

// Run watches PVCs, PVs and StorageClasses and expands claims until ctx
// is done (no leader election: every node runs its own). It blocks.
func (r *Resizer) Run(ctx context.Context) {
	f := informers.NewSharedInformerFactory(r.opts.Client, r.opts.ResyncPeriod)
	claimInf := f.Core().V1().PersistentVolumeClaims()
	r.claims, r.volumes, r.classes = claimInf.Lister(), f.Core().V1().PersistentVolumes().Lister(), f.Storage().V1().StorageClasses().Lister()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](r.opts.RetryMin, r.opts.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: r.driver + "-resizer"})
	defer queue.ShutDown()
	add := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := claimInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: add,
		UpdateFunc: func(o, n any) {
			if requeue(o, n) {
				add(n)
			}
		},
	}); err != nil {
		klog.FromContext(ctx).Error(err, "resizer: claim event handler")
		return
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.opts.Client.CoreV1().Events("")})
	defer b.Shutdown()
	r.events = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "external-resizer " + r.driver, Host: r.nodeID})

	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), claimInf.Informer().HasSynced,
		f.Core().V1().PersistentVolumes().Informer().HasSynced, f.Storage().V1().StorageClasses().Informer().HasSynced) {
		return
	}
	for range r.opts.Threadiness {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for r.work(ctx, queue) {
			}
		}, 0)
	}
	<-ctx.Done()
}

// requeue is external-resizer's updatePVC filter: a claim update is
// worth a sync when its storage request changed (growth, or a lower
// request recovering from a failed expansion), its capacity grew, or it is
// a resync (same resourceVersion); the resizer's own status writes are
// not, so a failing expansion is retried only with the queue's backoff.
func requeue(o, n any) bool {
	oc, ok1 := o.(*corev1.PersistentVolumeClaim)
	nc, ok2 := n.(*corev1.PersistentVolumeClaim)
	if !ok1 || !ok2 {
		return true
	}
	oreq, nreq := oc.Spec.Resources.Requests[corev1.ResourceStorage], nc.Spec.Resources.Requests[corev1.ResourceStorage]
	ocap, ncap := oc.Status.Capacity[corev1.ResourceStorage], nc.Status.Capacity[corev1.ResourceStorage]
	return nreq.Cmp(oreq) != 0 || ncap.Cmp(ocap) > 0 || nc.ResourceVersion == oc.ResourceVersion || nc.Status.Phase != oc.Status.Phase
}

// work syncs one claim from the queue; false once the queue shuts down.
func (r *Resizer) work(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	if err := r.sync(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "resizer: expanding claim", "claim", key)
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}
