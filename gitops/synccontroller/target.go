package synccontroller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/reconciler"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// DefaultKubeConfigKey is the Secret key of a target's kubeconfig when
// spec.target.kubeConfig.key is empty (Flux's "value").
const DefaultKubeConfigKey = "value"

// Owner label keys converge sets on every object it applies
// (reconciler.Owner's ssa owner labels).
var (
	ownerNameLabel      = reconciler.OwnerGroup + "/name"
	ownerNamespaceLabel = reconciler.OwnerGroup + "/namespace"
)

// TargetError is a failure to reach a Sync's target cluster. Stalled is
// true when a retry cannot fix it without a change to the Sync or its
// Secret (the Secret or its key is missing, the kubeconfig is malformed).
type TargetError struct {
	Stalled bool
	Err     error
}

func (e *TargetError) Error() string { return e.Err.Error() }
func (e *TargetError) Unwrap() error { return e.Err }

// targets keeps one target per cluster the Syncs drive, keyed by its
// kubeconfig Secret ("" for the controller's own cluster).
type targets struct {
	local   *rest.Config
	secrets client.Reader
	opts    reconciler.Options
	// lockdown says whom a Sync without spec.serviceAccountName writes as.
	lockdown Lockdown
	scheme   *runtime.Scheme
	ctrl     controller.Controller
	// wakes is marked by the drift watches before they enqueue a Sync.
	wakes *wakes

	mu    sync.Mutex
	byKey map[string]*target
	// users are the Syncs that use each target key; bySync is the key
	// each Sync used last. A remote target whose last user is deleted or
	// moves to another target is stopped and forgotten.
	users  map[string]map[types.NamespacedName]bool
	bySync map[types.NamespacedName]string
}

// target is one cluster: a cache of the objects carrying converge's owner
// labels (and Nodes, for the facts), its watches, and one Pipeline per
// impersonated user.
type target struct {
	name    string // for messages: "the local cluster", "kubeconfig Secret ns/name key value"
	version string // resourceVersion of the kubeconfig Secret
	config  *rest.Config
	cluster cluster.Cluster
	cancel  context.CancelFunc

	mu        sync.Mutex
	pipelines map[string]*reconciler.Pipeline
	watching  map[schema.GroupVersionKind]bool
	// owners maps a HyperConverged (whose owner labels an object carries)
	// to the Syncs that applied it into this target.
	owners map[types.NamespacedName]map[types.NamespacedName]bool
	// own tells the events of each Sync's own writes from drift.
	own *ownWrites
	// unsettled are the Syncs whose last apply failed: their next apply
	// reads the live state uncached.
	unsettled *unsettled
	// wakes is the targets' (marked before a drift event enqueues).
	wakes *wakes
}

func newTargets(local *rest.Config, secrets client.Reader, opts reconciler.Options, lockdown Lockdown, w *wakes) *targets {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	if w == nil {
		w = newWakes()
	}
	return &targets{local: local, secrets: secrets, opts: opts, lockdown: lockdown, scheme: s, wakes: w, byKey: map[string]*target{},
		users: map[string]map[types.NamespacedName]bool{}, bySync: map[types.NamespacedName]string{}}
}

// get returns the target of s and the Pipeline writing into it as
// spec.serviceAccountName or the lockdown's default service account
// (impersonated), or as the target's own identity.
// A kubeconfig Secret whose resourceVersion changed rebuilds the target.
// It records s as a user of the target, releasing the one s used before
// (stopped when s was its last user).
func (ts *targets) get(ctx context.Context, s *v1alpha1.Sync) (*target, *reconciler.Pipeline, error) {
	key, name, version, cfg := "", "the local cluster", "", ts.local
	if tg := s.Spec.Target; tg != nil {
		k := tg.KubeConfig.Key
		if k == "" {
			k = DefaultKubeConfigKey
		}
		ref := types.NamespacedName{Namespace: s.Namespace, Name: tg.KubeConfig.SecretRef.Name}
		name = fmt.Sprintf("kubeconfig Secret %s key %q", ref, k)
		sec := &corev1.Secret{}
		if err := ts.secrets.Get(ctx, ref, sec); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil, &TargetError{Stalled: true, Err: fmt.Errorf("%s: Secret not found", name)}
			}
			return nil, nil, &TargetError{Err: fmt.Errorf("%s: reading: %w", name, err)}
		}
		data, ok := sec.Data[k]
		if !ok {
			return nil, nil, &TargetError{Stalled: true, Err: fmt.Errorf("%s: no such key in the Secret", name)}
		}
		c, err := clientcmd.RESTConfigFromKubeConfig(data)
		if err != nil {
			return nil, nil, &TargetError{Stalled: true, Err: fmt.Errorf("%s: not a usable kubeconfig: %w", name, err)}
		}
		key, version, cfg = ref.String()+"#"+k, sec.ResourceVersion, c
	}
	t, err := ts.target(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, key, name, version, cfg)
	if err != nil {
		return nil, nil, &TargetError{Err: err}
	}
	user := ""
	if sa := ts.lockdown.serviceAccount(s); sa != "" {
		user = "system:serviceaccount:" + s.Namespace + ":" + sa
	}
	p, err := t.pipeline(user, ts.scheme, ts.opts)
	if err != nil {
		return nil, nil, &TargetError{Err: fmt.Errorf("%s: %w", name, err)}
	}
	return t, p, nil
}

// target returns the running target of key for sync, starting it (and
// stopping a previous one built from another Secret version) as needed.
func (ts *targets) target(ctx context.Context, sync types.NamespacedName, key, name, version string, cfg *rest.Config) (*target, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if old, ok := ts.bySync[sync]; ok && old != key {
		ts.release(ctx, sync, old)
	}
	if t := ts.byKey[key]; t != nil {
		if t.version == version {
			ts.use(sync, key)
			return t, nil
		}
		log.FromContext(ctx).Info("kubeconfig changed: rebuilding the target", "target", name)
		t.cancel()
		delete(ts.byKey, key)
	}
	sel := labels.NewSelector()
	req, err := labels.NewRequirement(ownerNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	sel = sel.Add(*req)
	cfg = rest.CopyConfig(cfg)
	cl, err := cluster.New(cfg, func(o *cluster.Options) {
		o.Scheme = ts.scheme
		o.Cache = cache.Options{
			DefaultLabelSelector: sel,
			ByObject:             map[client.Object]cache.ByObject{&corev1.Node{}: {Label: labels.Everything()}},
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%s: connecting: %w", name, err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	go func() {
		if err := cl.Start(cctx); err != nil {
			log.FromContext(ctx).Error(err, "target cache stopped", "target", name)
		}
	}()
	t := &target{name: name, version: version, config: cfg, cluster: cl, cancel: cancel,
		pipelines: map[string]*reconciler.Pipeline{}, watching: map[schema.GroupVersionKind]bool{},
		owners: map[types.NamespacedName]map[types.NamespacedName]bool{}, own: newOwnWrites(), unsettled: newUnsettled(), wakes: ts.wakes}
	ts.byKey[key] = t
	ts.use(sync, key)
	return t, nil
}

// use records sync as a user of the target key; ts.mu is held.
func (ts *targets) use(sync types.NamespacedName, key string) {
	ts.bySync[sync] = key
	if ts.users[key] == nil {
		ts.users[key] = map[types.NamespacedName]bool{}
	}
	ts.users[key][sync] = true
}

// release drops sync from the users of the target key and from its owner
// map; a remote target (key != "") left without users has its cache
// stopped and is forgotten (a later Sync starts it again). ts.mu is held.
func (ts *targets) release(ctx context.Context, sync types.NamespacedName, key string) {
	delete(ts.users[key], sync)
	if ts.bySync[sync] == key {
		delete(ts.bySync, sync)
	}
	t := ts.byKey[key]
	if t != nil {
		t.mu.Lock()
		for hc, syncs := range t.owners {
			delete(syncs, sync)
			if len(syncs) == 0 {
				delete(t.owners, hc)
			}
		}
		t.mu.Unlock()
		t.own.forget(sync)
	}
	if key == "" || len(ts.users[key]) > 0 {
		return
	}
	delete(ts.users, key)
	if t != nil {
		log.FromContext(ctx).Info("no Sync uses the target any more: stopping its cache", "target", t.name)
		t.cancel()
		delete(ts.byKey, key)
	}
}

// names lists the names of the running targets, sorted.
func (ts *targets) names() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := make([]string, 0, len(ts.byKey))
	for _, t := range ts.byKey {
		out = append(out, t.name)
	}
	sort.Strings(out)
	return out
}

// stopAll stops every target's cache.
func (ts *targets) stopAll() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for k, t := range ts.byKey {
		t.cancel()
		delete(ts.byKey, k)
	}
}

// forget releases the target the Sync used (stopping a remote one it was
// the last user of) and drops the Sync from every target's owner map.
func (ts *targets) forget(ctx context.Context, sync types.NamespacedName) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if key, ok := ts.bySync[sync]; ok {
		ts.release(ctx, sync, key)
	}
	for _, t := range ts.byKey {
		t.mu.Lock()
		for hc, syncs := range t.owners {
			delete(syncs, sync)
			if len(syncs) == 0 {
				delete(t.owners, hc)
			}
		}
		t.mu.Unlock()
		t.own.forget(sync)
		t.unsettled.applied(sync, false)
	}
}

// unsettle marks sync unsettled in the target it used last: its status,
// with the inventory its apply saved, could not be written, so the next
// apply starts from an older inventory and must not trust the cache.
func (ts *targets) unsettle(sync types.NamespacedName) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t := ts.byKey[ts.bySync[sync]]; t != nil {
		t.unsettled.applied(sync, true)
	}
}

// pipeline returns the Pipeline writing as user ("" for the target's own
// identity), reading live state from the target's cache.
func (t *target) pipeline(user string, scheme *runtime.Scheme, opts reconciler.Options) (*reconciler.Pipeline, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.pipelines[user]; p != nil {
		return p, nil
	}
	cfg := rest.CopyConfig(t.config)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: t.cluster.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	p := reconciler.NewPipeline(c, t.cluster.GetCache(), opts)
	t.pipelines[user] = p
	return p, nil
}

// watch records that sync applied the objects of hc into t and starts a
// metadata-only watch for each of gvks not yet watched: an event on an
// object carrying hc's owner labels enqueues every Sync that applied hc,
// unless it is that Sync's own write (ownWrites).
func (t *target) watch(ctx context.Context, c controller.Controller, gvks []schema.GroupVersionKind, hc, sync types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.owners[hc] == nil {
		t.owners[hc] = map[types.NamespacedName]bool{}
	}
	t.owners[hc][sync] = true
	if c == nil {
		return
	}
	for _, gvk := range gvks {
		if t.watching[gvk] {
			continue
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		src := source.Kind(t.cluster.GetCache(), obj, t.handler(gvk.GroupKind()),
			predicate.TypedResourceVersionChangedPredicate[*metav1.PartialObjectMetadata]{})
		if err := c.Watch(src); err != nil {
			log.FromContext(ctx).Error(err, "watching for drift", "target", t.name, "kind", gvk.String())
			continue
		}
		t.watching[gvk] = true
	}
}

// handler gives the event handler of the watch of kind gk: each event
// enqueues the Syncs that applied the object's owner HC and for which it
// is not their own write (ownWrites.foreign), marked (wakes) with whether
// it changed only the object's status (statusOnly).
func (t *target) handler(gk schema.GroupKind) handler.TypedEventHandler[*metav1.PartialObjectMetadata, reconcile.Request] {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	enqueue := func(o *metav1.PartialObjectMetadata, deleted, statusOnly bool, q queue) {
		ev := ownEvent{id: inventory.IDOf(o.GetNamespace(), o.GetName(), gk), version: o.GetResourceVersion(), deleted: deleted, statusOnly: statusOnly}
		for _, s := range t.syncsOf(o) {
			if t.own.foreign(s, ev) {
				t.wakes.mark(s, statusOnly)
				q.Add(reconcile.Request{NamespacedName: s})
			}
		}
	}
	return handler.TypedFuncs[*metav1.PartialObjectMetadata, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*metav1.PartialObjectMetadata], q queue) {
			enqueue(e.Object, false, false, q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*metav1.PartialObjectMetadata], q queue) {
			enqueue(e.ObjectNew, false, statusOnly(gk, e.ObjectOld, e.ObjectNew), q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*metav1.PartialObjectMetadata], q queue) {
			enqueue(e.Object, true, false, q)
		},
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[*metav1.PartialObjectMetadata], q queue) {
			enqueue(e.Object, false, false, q)
		},
	}
}

// syncsOf gives the Syncs that applied the owner HC of o.
func (t *target) syncsOf(o *metav1.PartialObjectMetadata) []types.NamespacedName {
	l := o.GetLabels()
	hc := types.NamespacedName{Namespace: l[ownerNamespaceLabel], Name: l[ownerNameLabel]}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []types.NamespacedName
	for s := range t.owners[hc] {
		out = append(out, s)
	}
	return out
}

// isStalledTarget reports whether err is a TargetError a retry will not fix.
func isStalledTarget(err error) bool {
	var te *TargetError
	return errors.As(err, &te) && te.Stalled
}
