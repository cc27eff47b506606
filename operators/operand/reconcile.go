package operand

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/reconciler"
)

// Reconciler is one native operator's controller: it reconciles the CRs
// of Operator.GVK marked native (and those still carrying its finalizer).
type Reconciler struct {
	op     Operator
	o      Options
	engine *graph.Engine
	// crs lists the operand CRs (the manager's cache); c writes.
	crs ctrl.Reader
	c   ctrl.Client
	// direct reads the CR being reconciled and the inventory ConfigMaps
	// (the API server); roles reads the applied
	// objects and pods (the operator's cache, owner-labelled only).
	direct, roles ctrl.Reader
	pipeline      *reconciler.Pipeline
	gates         *Gates
	log           logr.Logger
}

// Reconcile derives, applies and reports on one CR, or removes its roles
// when it is deleted or left native mode.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	defer r.recount(ctx)
	// The CR is read from the API server, not the cache: its status is
	// this reconcile's Previous, and a cache that has not yet seen the
	// last reconcile's status write would make a pod still starting
	// after a change look like a pod lost from an Available component
	// (Degraded).
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(r.op.GVK)
	if err := r.direct.Get(ctx, req.NamespacedName, cr); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	if cr.GetDeletionTimestamp() != nil || !isNative(cr) {
		if !controllerutil.ContainsFinalizer(cr, r.op.finalizer()) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, r.finalize(ctx, cr)
	}
	if !controllerutil.ContainsFinalizer(cr, r.op.finalizer()) {
		patch := ctrl.MergeFrom(cr.DeepCopy())
		controllerutil.AddFinalizer(cr, r.op.finalizer())
		if err := r.c.Patch(ctx, cr, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("%s: adding finalizer: %w", r.what(cr), err)
		}
	}
	err := r.deploy(ctx, cr)
	if errors.Is(err, errRequeue) {
		return reconcile.Result{RequeueAfter: r.o.Poll}, nil
	}
	return reconcile.Result{}, err
}

// deploy derives cr's roles, applies them (unless the derivation failed or
// was refused) and writes cr's status from its workloads' readiness. An
// apply error is returned (and retried with backoff); a derivation error
// or a refusal waits for the CR to change.
func (r *Reconciler) deploy(ctx context.Context, cr *unstructured.Unstructured) error {
	ns := r.namespace(cr)
	store := r.store(cr, ns)
	owner := types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}
	var failure *Failure
	var applyErr error
	var inv *v1alpha1.Inventory
	changed := false
	// What runs now, before this reconcile's apply: the state the event
	// that triggered it saw. A pod replaced in less time than the apply
	// takes would otherwise never show (the VM agent's comes back within
	// a second); an event arriving meanwhile queues the next reconcile,
	// which reports what follows.
	before, genBefore, err := r.readiness(ctx, store)
	if err != nil {
		return fmt.Errorf("%s: %w", r.what(cr), err)
	}
	first, err := r.deployed(ctx, cr)
	if err != nil {
		return err
	}
	inputs, err := r.readInputs(ctx, cr)
	if err != nil {
		return fmt.Errorf("%s: reading the roles' inputs: %w", r.what(cr), err)
	}
	roles, err := r.engine.Roles(r.op.GVK.Kind, cr, graph.RoleInputs{Namespace: ns, Images: r.o.Images, Inputs: inputs})
	switch {
	case first != "":
		failure = &Failure{Reason: ReasonExisting, Message: fmt.Sprintf("%s is deployed already; converge runs one %s", first, r.op.GVK.Kind)}
	case err != nil:
		failure = &Failure{Reason: ReasonFailed, Message: "deriving the roles: " + err.Error()}
	case len(roles.Refusals) > 0:
		failure = &Failure{Reason: ReasonUnsupported, Message: strings.Join(roles.Refusals, "; ")}
	default:
		objs := withTemplateLabels(roles.Objects, r.pipeline.OwnerLabels(owner.Namespace, owner.Name))
		name := strings.ToLower(r.op.GVK.Kind)
		rendered := &graph.Rendered{
			Nodes:     []graph.Node{{Name: name, Objects: objs}},
			Stages:    []graph.Stage{{Name: name, Nodes: []string{name}, Objects: objs}},
			Health:    map[string]string{"DaemonSet": "none", "Deployment": "none"},
			OwnedByHC: map[string]bool{},
		}
		res, err := r.pipeline.Sync(ctx, reconciler.Input{Rendered: rendered, Owner: owner, Inventory: store,
			Revision: fmt.Sprintf("generation %d", cr.GetGeneration())})
		if res != nil {
			inv = res.Inventory
			genAfter, err := workloadGenerations(ctx, r.direct, inv)
			if err != nil {
				return fmt.Errorf("%s: %w", r.what(cr), err)
			}
			changed = specChanged(genBefore, genAfter)
		}
		if err != nil {
			applyErr = fmt.Errorf("%s: applying the roles: %w", r.what(cr), err)
			failure = &Failure{Reason: ReasonFailed, Message: "applying the roles: " + err.Error()}
		}
	}
	if inv == nil {
		prev, err := store.Load(ctx)
		if err != nil {
			return err
		}
		inv = prev.Inventory
	}
	readiness := before
	if changed || before == nil || before.Ready {
		// The apply changed a workload (what ran before says nothing of
		// the new spec), or nothing was applied before, or all was ready
		// then: judge what runs after it.
		ws, err := readWorkloads(ctx, r.roles, r.direct, inv)
		if err != nil {
			return fmt.Errorf("%s: %w", r.what(cr), err)
		}
		after := Assess(ws)
		readiness = &after
	}
	if inv == nil || len(inv.Entries) == 0 {
		// Nothing applied (yet): not a component without workloads.
		readiness = &Readiness{Message: "no roles applied"}
	}
	status, _, _ := unstructured.NestedMap(cr.Object, "status")
	report := Compute(Observation{Generation: cr.GetGeneration(), Version: r.o.Version, Readiness: *readiness,
		Failure: failure, Changed: changed, Previous: r.op.Status.Previous(status)}, metav1.NewTime(time.Now().Truncate(time.Second)))
	if err := r.writeStatus(ctx, cr, report); err != nil {
		return err
	}
	if failure != nil && applyErr == nil {
		r.log.Info("roles not applied", "cr", r.what(cr), "reason", failure.Reason, "message", failure.Message)
	}
	if applyErr == nil && (failure == nil || failure.Reason == ReasonExisting) && !report.ready() {
		// The workloads' and pods' watches see most changes; a pod its
		// controller cannot create shows only in events, which are not
		// watched, and the CR deployed instead of this one may go. A
		// refused or underivable CR waits for a change of its own.
		return errRequeue
	}
	return applyErr
}

// errRequeue asks Reconcile for a requeue after Options.Poll.
var errRequeue = errors.New("requeue")

// deployed gives, for a Singleton operator, the CR deployed instead of cr
// ("Kind ns/name"): the oldest other native CR not being deleted, by
// creation, then namespace and name. It gives "" when cr is the one.
func (r *Reconciler) deployed(ctx context.Context, cr *unstructured.Unstructured) (string, error) {
	if !r.op.Singleton {
		return "", nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(r.op.GVK.GroupVersion().WithKind(r.op.GVK.Kind + "List"))
	if err := r.crs.List(ctx, list); err != nil {
		return "", fmt.Errorf("listing the %s CRs: %w", r.op.GVK.Kind, err)
	}
	older := func(a, b *unstructured.Unstructured) bool {
		ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
		if !ta.Equal(&tb) {
			return ta.Before(&tb)
		}
		return a.GetNamespace()+"/"+a.GetName() < b.GetNamespace()+"/"+b.GetName()
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.GetUID() == cr.GetUID() || !isNative(o) || o.GetDeletionTimestamp() != nil {
			continue
		}
		if older(o, cr) {
			return r.what(o), nil
		}
	}
	return "", nil
}

// finalize removes what cr's roles applied (the inventory's objects, with
// the prune rules, then the inventory ConfigMap) and then the finalizer.
// A CR being deleted reports phase Deleting first; one that left native
// mode is left to the upstream operator's status.
func (r *Reconciler) finalize(ctx context.Context, cr *unstructured.Unstructured) error {
	if isNative(cr) {
		status, _, _ := unstructured.NestedMap(cr.Object, "status")
		report := Compute(Observation{Generation: cr.GetGeneration(), Version: r.o.Version, Deleting: true,
			Previous: r.op.Status.Previous(status)}, metav1.NewTime(time.Now().Truncate(time.Second)))
		if err := r.writeStatus(ctx, cr, report); err != nil && !apierrors.IsNotFound(err) {
			r.log.Error(err, "reporting the deletion", "cr", r.what(cr))
		}
	}
	ns := r.namespace(cr)
	if _, err := r.pipeline.Uninstall(ctx, r.store(cr, ns), r.pipeline.OwnerLabels(cr.GetNamespace(), cr.GetName())); err != nil {
		return fmt.Errorf("%s: removing the roles: %w", r.what(cr), err)
	}
	if cr.GetDeletionTimestamp() == nil {
		// The CR left native mode: what this operator reported no longer
		// describes anything running; the upstream operator reports next.
		if err := r.releaseStatus(ctx, cr); err != nil {
			return err
		}
	}
	patch := ctrl.MergeFrom(cr.DeepCopy())
	controllerutil.RemoveFinalizer(cr, r.op.finalizer())
	if err := r.c.Patch(ctx, cr, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: removing finalizer: %w", r.what(cr), err)
	}
	r.log.Info("roles removed", "cr", r.what(cr), "native", isNative(cr))
	return nil
}

// writeStatus writes report, laid out by Operator.Status, as cr's status
// with server-side apply (the operator's field manager) on the status
// subresource, unless cr's status already holds it.
func (r *Reconciler) writeStatus(ctx context.Context, cr *unstructured.Unstructured, report Report) error {
	desired := r.op.Status.Status(report)
	cur, _, _ := unstructured.NestedMap(cr.Object, "status")
	if holds(cur, desired) {
		return nil
	}
	md := map[string]any{"name": cr.GetName()}
	if cr.GetNamespace() != "" {
		md["namespace"] = cr.GetNamespace()
	}
	patch := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": cr.GetAPIVersion(), "kind": cr.GetKind(), "metadata": md, "status": desired}}
	if err := r.c.Status().Patch(ctx, patch, ctrl.Apply, ctrl.FieldOwner(r.op.fieldManager()), ctrl.ForceOwnership); err != nil {
		return fmt.Errorf("%s: writing status: %w", r.what(cr), err)
	}
	return nil
}

// readiness assesses the workloads of the inventory in store as the
// cache has them (nil when there is no inventory yet) and gives their
// generations as the API server has them (workloadGenerations).
func (r *Reconciler) readiness(ctx context.Context, store reconciler.ConfigMapStore) (*Readiness, map[string]int64, error) {
	prev, err := store.Load(ctx)
	if err != nil {
		return nil, nil, err
	}
	gens, err := workloadGenerations(ctx, r.direct, prev.Inventory)
	if err != nil {
		return nil, nil, err
	}
	if prev.Inventory == nil || len(prev.Inventory.Entries) == 0 {
		return nil, gens, nil
	}
	ws, err := readWorkloads(ctx, r.roles, r.direct, prev.Inventory)
	if err != nil {
		return nil, nil, err
	}
	rd := Assess(ws)
	return &rd, gens, nil
}

// releaseStatus removes from cr's status every field this operator wrote
// (phase, versions, observedGeneration) and empties its conditions: a
// status of only an empty conditions list, applied by its field manager,
// drops what else it owned (an empty status would be null, which the
// CRDs' schemas refuse) and leaves fields another manager wrote.
func (r *Reconciler) releaseStatus(ctx context.Context, cr *unstructured.Unstructured) error {
	md := map[string]any{"name": cr.GetName()}
	if cr.GetNamespace() != "" {
		md["namespace"] = cr.GetNamespace()
	}
	patch := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": cr.GetAPIVersion(), "kind": cr.GetKind(), "metadata": md, "status": map[string]any{"conditions": []any{}}}}
	if err := r.c.Status().Patch(ctx, patch, ctrl.Apply, ctrl.FieldOwner(r.op.fieldManager()), ctrl.ForceOwnership); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: releasing its status: %w", r.what(cr), err)
	}
	return nil
}

// holds reports whether cur has every field of desired with the same
// value (compared as JSON).
func holds(cur, desired map[string]any) bool {
	for k, v := range desired {
		if !reflect.DeepEqual(jsonOf(cur[k]), jsonOf(v)) {
			return false
		}
	}
	return true
}

func jsonOf(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// recount lists the CRs of the kind and lets the gates count them.
func (r *Reconciler) recount(ctx context.Context) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(r.op.GVK.GroupVersion().WithKind(r.op.GVK.Kind + "List"))
	if err := r.crs.List(ctx, list); err != nil {
		r.log.Error(err, "counting the CRs for the role gates")
		return
	}
	r.gates.observe(list.Items)
}

// namespace is where cr's roles go: its own namespace, or for a
// cluster-scoped CR the one its NamespaceAnnotation names, else
// Options.Namespace.
func (r *Reconciler) namespace(cr *unstructured.Unstructured) string {
	if r.op.ClusterScoped || cr.GetNamespace() == "" {
		if ns := cr.GetAnnotations()[NamespaceAnnotation]; ns != "" {
			return ns
		}
		return r.o.Namespace
	}
	return cr.GetNamespace()
}

// store is cr's inventory: a ConfigMap in ns.
func (r *Reconciler) store(cr *unstructured.Unstructured, ns string) reconciler.ConfigMapStore {
	return reconciler.ConfigMapStore{Client: r.c, Reader: r.direct, Namespace: ns, Name: cr.GetName(),
		ConfigMap: r.op.inventoryName(cr.GetName()), FieldManager: r.op.fieldManager()}
}

// what names cr as "Kind namespace/name" or "Kind name".
func (r *Reconciler) what(cr *unstructured.Unstructured) string {
	if cr.GetNamespace() != "" {
		return r.op.GVK.Kind + " " + cr.GetNamespace() + "/" + cr.GetName()
	}
	return r.op.GVK.Kind + " " + cr.GetName()
}
