package reconciler

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/converge-dev/converge/gitops"
	"github.com/converge-dev/converge/graph"
)

// GitSync continuously drives the config at Path in a Git repository
// into the manager's cluster: on every interval, on every change to an
// object it applied (drift), and on a Trigger. One GitSync serves one
// source; all events map to the single request SyncRequest.
type GitSync struct {
	Fetcher  *gitops.Fetcher
	Source   gitops.Source
	Path     string
	Interval time.Duration
	Engine   *graph.Engine
	Pipeline *Pipeline
	// Facts returns the cluster facts; nil uses the schema defaults.
	Facts func(ctx context.Context) (map[string]any, error)
	// OnResult, if set, is called after every sync (for logs and tests).
	OnResult func(*Result, error)
	// OnRender, if set, is called with every new successful render (a new
	// revision or new facts), before it is applied; the controller uses it
	// to follow the HC's certConfig for its webhook certificate.
	OnRender func(*graph.Rendered)

	mu       sync.Mutex
	last     lastRender
	ctrl     controller.Controller
	mgr      ctrl.Manager
	watching map[schema.GroupVersionKind]bool
	trigger  chan event.GenericEvent
}

type lastRender struct {
	revision, facts string
	rendered        *graph.Rendered
	hc              types.NamespacedName
}

// SyncRequest is the one request GitSync reconciles.
var SyncRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "converge"}}

// Reconcile fetches, renders (reusing the last render when neither the
// revision nor the facts changed) and syncs; it requeues after Interval.
// A fetch or render error applies nothing and keeps the last good
// revision; it is reported on the HC status and returned.
func (s *GitSync) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	in := s.input(ctx)
	res, err := s.Pipeline.Sync(ctx, in)
	if err != nil && ctx.Err() != nil {
		// Shutting down: the interrupted sync is retried on the next start.
		return reconcile.Result{}, nil
	}
	if err == nil && in.Rendered != nil && s.ctrl != nil {
		s.ensureWatches(ctx, in.Rendered)
	}
	if s.OnResult != nil {
		s.OnResult(res, err)
	}
	if err != nil {
		logger.Error(err, "sync failed", "revision", in.Revision)
		return reconcile.Result{RequeueAfter: s.Interval}, nil
	}
	logger.V(1).Info("synced", "revision", in.Revision, "writes", res.Writes, "waiting", res.Waiting)
	after := s.Interval
	if res.Waiting && res.RequeueAfter > 0 && res.RequeueAfter < after {
		after = res.RequeueAfter // a health gate deferred a component
	}
	return reconcile.Result{RequeueAfter: after}, nil
}

// input fetches and renders, or returns the error as Input.Err.
func (s *GitSync) input(ctx context.Context) Input {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	fail := func(rev string, err error) Input { return Input{Revision: rev, Err: err, HC: last.hc} }

	art, err := s.Fetcher.Fetch(ctx, s.Source)
	if err != nil {
		return fail(last.revision, err)
	}
	var f map[string]any
	if s.Facts != nil {
		if f, err = s.Facts(ctx); err != nil {
			return fail(art.Revision, err)
		}
	}
	fd := digestOf(f)
	if last.rendered != nil && last.revision == art.Revision && last.facts == fd {
		return Input{Rendered: last.rendered, Revision: art.Revision}
	}
	dir, err := art.Path(s.Path)
	if err != nil {
		return fail(art.Revision, err)
	}
	cfg, err := s.Engine.LoadConfig(dir)
	if err != nil {
		return fail(art.Revision, fmt.Errorf("revision %s: %w", art.Revision, err))
	}
	r, err := s.Engine.Render(cfg, f)
	if err != nil {
		return fail(art.Revision, fmt.Errorf("revision %s: %w", art.Revision, err))
	}
	s.mu.Lock()
	s.last = lastRender{revision: art.Revision, facts: fd, rendered: r,
		hc: types.NamespacedName{Namespace: r.HyperConverged.GetNamespace(), Name: r.HyperConverged.GetName()}}
	s.mu.Unlock()
	if s.OnRender != nil {
		s.OnRender(r)
	}
	return Input{Rendered: r, Revision: art.Revision}
}

// Trigger asks for a reconcile now (e.g. from a webhook or a test).
func (s *GitSync) Trigger() {
	select {
	case s.trigger <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{}}:
	default:
	}
}

// SetupWithManager registers the controller. It reconciles once at start
// and watches, metadata only, every kind it applies as soon as the kind
// is served, so drift is corrected within seconds.
func (s *GitSync) SetupWithManager(mgr ctrl.Manager) error {
	s.trigger = make(chan event.GenericEvent, 1)
	s.watching = map[schema.GroupVersionKind]bool{}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("converge").
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		WatchesRawSource(source.Channel(s.trigger, handler.EnqueueRequestsFromMapFunc(
			func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{SyncRequest} }))).
		Build(s)
	if err != nil {
		return err
	}
	s.ctrl = c
	s.mgr = mgr
	s.trigger <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{}}
	return nil
}

// ensureWatches starts a metadata-only watch for every kind of r not yet
// watched. An event on an object carrying converge's owner labels
// enqueues SyncRequest.
func (s *GitSync) ensureWatches(ctx context.Context, r *graph.Rendered) {
	owner := s.Pipeline.ownerLabels(r)
	for _, gvk := range kinds(r) {
		if s.watching[gvk] {
			continue
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		src := source.Kind(s.mgr.GetCache(), obj,
			handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
				for k, v := range owner {
					if o.GetLabels()[k] != v {
						return nil
					}
				}
				return []reconcile.Request{SyncRequest}
			}),
			predicate.TypedResourceVersionChangedPredicate[*metav1.PartialObjectMetadata]{})
		if err := s.ctrl.Watch(src); err != nil {
			log.FromContext(ctx).Error(err, "watch", "kind", gvk.String())
			continue
		}
		s.watching[gvk] = true
	}
}

func digestOf(v any) string {
	b, _ := json.Marshal(v)
	return fmt.Sprintf("%x", sha256.Sum256(b))
}
