package operand

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/converge-dev/converge/internal/crdwait"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/reconciler"
)

// Setup adds op to mgr and gives the gates of its roles. It checks op and
// o (a name, a kind with roles in the engine's components, a CRD, the
// node image, a namespace for a cluster-scoped kind), adds a cache of
// what the operator applies (objects and pods carrying its owner labels)
// and a leader-only runnable that waits for op.CRD (and the CRDs of
// op.Inputs) to be established (polling every o.Poll) and then starts the
// controller, plus one
// leader-only runnable per role that ends the manager with ErrRoleGone
// once the last native CR wanting the role is gone. mgr's scheme must know
// the client-go types.
func Setup(mgr manager.Manager, engine *graph.Engine, op Operator, o Options) (*Gates, error) {
	if err := validate(engine, op, o); err != nil {
		return nil, err
	}
	req, err := labels.NewRequirement(op.ownerGroup()+"/name", selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	roles, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultLabelSelector: labels.NewSelector().Add(*req)})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(roles); err != nil {
		return nil, err
	}
	popts := reconciler.DefaultOptions()
	popts.FieldManager, popts.OwnerGroup = op.fieldManager(), op.ownerGroup()
	popts.HealthGates, popts.Wait = false, false
	popts.WaitTimeout = o.WaitTimeout
	gates := newGates(op)
	r := &Reconciler{op: op, o: o, engine: engine, crs: mgr.GetCache(), c: mgr.GetClient(),
		direct: mgr.GetAPIReader(), roles: roles,
		pipeline: reconciler.NewPipeline(mgr.GetClient(), roles, popts), gates: gates,
		log: mgr.GetLogger().WithName(op.Name)}
	if err := mgr.Add(leaderRunnable(func(ctx context.Context) error {
		if !crdwait.Wait(ctx, mgr.GetAPIReader(), o.Poll, op.crds()...) {
			return nil
		}
		// Established is not yet mapped: the manager's RESTMapper learns
		// the group from discovery, which can lag (an APIService being
		// registered makes it partial); the controller's watch of the CR
		// would log "no matches for kind" until it does.
		for {
			if _, err := mgr.GetRESTMapper().RESTMapping(op.GVK.GroupKind(), op.GVK.Version); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(o.Poll):
			}
		}
		r.log.Info(strings.Join(op.crds(), ", ") + " established; starting the operator")
		if err := r.setupController(mgr, roles); err != nil {
			return fmt.Errorf("%s: %w", op.Name, err)
		}
		<-ctx.Done()
		return nil
	})); err != nil {
		return nil, err
	}
	if len(op.Roles) > 0 {
		if err := mgr.Add(leaderRunnable(gates.watch)); err != nil {
			return nil, err
		}
	}
	return gates, nil
}

// validate checks what Setup needs of op and o.
func validate(engine *graph.Engine, op Operator, o Options) error {
	var errs []error
	if op.Name == "" || op.GVK.Kind == "" || op.CRD == "" {
		errs = append(errs, errors.New("Operator needs a Name, a GVK and a CRD"))
	}
	found := false
	for _, k := range engine.RoleKinds() {
		found = found || k == op.GVK.Kind
	}
	if !found {
		errs = append(errs, fmt.Errorf("components/graph.cue Roles has no %s", op.GVK.Kind))
	}
	if o.Images["node"] == "" {
		errs = append(errs, errors.New(`Options.Images["node"] (the converge-node image) is empty`))
	}
	if op.ClusterScoped && o.Namespace == "" {
		errs = append(errs, fmt.Errorf("%s is cluster-scoped: Options.Namespace (where its roles go) is empty", op.GVK.Kind))
	}
	if o.Poll <= 0 || o.WaitTimeout <= 0 {
		errs = append(errs, errors.New("Options.Poll and Options.WaitTimeout must be positive (DefaultOptions)"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("operand %s: %w", op.Name, err)
	}
	return nil
}

// setupController builds the controller: the native CRs of the kind (and
// those still carrying the finalizer), and the DaemonSets, Deployments
// and pods of the operator's cache, each mapped to its CR by the owner
// labels.
func (r *Reconciler) setupController(mgr manager.Manager, roles cache.Cache) error {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(r.op.GVK)
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		u, ok := o.(*unstructured.Unstructured)
		return ok && (isNative(u) || controllerutil.ContainsFinalizer(u, r.op.finalizer()))
	})
	owner := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		l := o.GetLabels()
		name, ok := l[r.op.ownerGroup()+"/name"]
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[r.op.ownerGroup()+"/namespace"], Name: name}}}
	})
	skip := r.o.SkipNameValidation
	b := ctrl.NewControllerManagedBy(mgr).
		Named(r.op.Name).
		WithOptions(controller.Options{SkipNameValidation: &skip}).
		For(cr, builder.WithPredicates(ours)).
		WatchesRawSource(source.Kind(roles, client.Object(&appsv1.DaemonSet{}), owner)).
		WatchesRawSource(source.Kind(roles, client.Object(&appsv1.Deployment{}), owner)).
		WatchesRawSource(source.Kind(roles, client.Object(&corev1.Pod{}), owner))
	// An input's change re-derives every CR (Operator.Inputs).
	if r.op.Inputs != nil {
		for _, gvk := range r.op.Inputs.Watch {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			b = b.WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(u), r.everyCR()))
		}
	}
	return b.Complete(r)
}

// leaderRunnable is a manager runnable that runs on the leader only.
type leaderRunnable func(ctx context.Context) error

func (f leaderRunnable) Start(ctx context.Context) error { return f(ctx) }
func (f leaderRunnable) NeedLeaderElection() bool        { return true }
