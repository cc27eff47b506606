package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
)

// Pipeline applies rendered graphs into one cluster. It is the one engine
// behind `converge apply` and converge-controller.
type Pipeline struct {
	// Client writes (SSA PATCH, delete, status).
	Client client.Client
	// Reader reads live state: a cache-backed reader in the controller
	// (no API requests), the API otherwise.
	Reader client.Reader
	// Manager is fluxcd/pkg/ssa's ResourceManager, used for health waits
	// (kstatus) and deletes.
	Manager *ssa.ResourceManager
	Options Options
}

// NewPipeline returns a Pipeline writing through c and reading through r
// (c itself when r is nil).
func NewPipeline(c client.Client, r client.Reader, opts Options) *Pipeline {
	if r == nil {
		r = c
	}
	poller := polling.NewStatusPoller(c, c.RESTMapper(), polling.Options{})
	m := ssa.NewResourceManager(c, poller, ssa.Owner{Field: opts.fieldManager(), Group: opts.ownerGroup()})
	m.SetConcurrency(opts.Concurrency)
	return &Pipeline{Client: c, Reader: r, Manager: m, Options: opts}
}

// Input is one sync request.
type Input struct {
	// Rendered is the rendered graph; nil when fetch or render failed.
	Rendered *graph.Rendered
	// Revision is the config revision Rendered came from.
	Revision string
	// Err is the fetch or render error when Rendered is nil.
	Err error
	// HC names the HyperConverged whose status reports a failure when
	// Rendered is nil (the last known one); zero to skip.
	HC types.NamespacedName
	// Inventory keeps the inventory; nil uses a ConfigMapStore named
	// after the owner in its namespace.
	Inventory InventoryStore
	// Owner names what the applied objects belong to: their ownership
	// labels carry its name and namespace (OwnerLabels). Zero means the
	// rendered HyperConverged. A render without a HyperConverged (a
	// native operator's roles) needs an Owner, and gets no HC status.
	Owner types.NamespacedName
	// LiveReader, when set, replaces Pipeline.Reader for what decides
	// whether an object may be skipped: the live objects (ReadLive) and
	// the inventory ConfigMap. Pass an uncached reader after a sync that
	// failed: its writes may have reached the API server unacknowledged
	// (a delete whose response was lost to an API server restart), and a
	// cache that has not caught up would still list the deleted object
	// at the resourceVersion the inventory recorded, so the object would
	// be skipped, not created again. It costs one LIST per kind.
	LiveReader client.Reader
}

// Result is what one sync did.
type Result struct {
	Revision string
	// ChangeSet lists every desired object (created, configured,
	// unchanged, or skipped when its component was deferred by a health
	// gate) then every pruned one (deleted, or skipped when it lost its
	// owner labels or has converge.dev/prune: disabled).
	ChangeSet *ssa.ChangeSet
	// Inventory is the inventory saved.
	Inventory *v1alpha1.Inventory
	// Conditions are the HC conditions written.
	Conditions []metav1.Condition
	// Writes counts the write requests sent to the API server.
	Writes int
	// Components is the health of every component evaluated, in graph
	// order (all of them after a successful apply).
	Components []ComponentHealth
	// Waiting is true when a health gate deferred a component: the sync
	// applied what it could and should be run again (RequeueAfter).
	Waiting bool
	// RequeueAfter is the suggested delay before the next sync while
	// Waiting (Options.WaitingRequeue); zero otherwise. The metadata
	// watches usually trigger one sooner: an operator's status update
	// bumps its CR's resourceVersion.
	RequeueAfter time.Duration
	// Drifted lists, by inventory ID (sorted), the objects re-applied
	// although their desired digest was unchanged, because someone else
	// changed or deleted a field or object converge owns; the apply put
	// them back. A change only to fields converge does not own (another
	// manager's label, a field the rendered object does not set, an
	// ignore rule's path) changes nothing on re-apply and is not drift.
	// Converge's own writes (the HC status, the versions recorded after a
	// kstatus wait) are recorded in the inventory and never count.
	Drifted []string
	// Recreated lists, by inventory ID (sorted), the objects deleted and
	// created again because an immutable field changed (ForceAnnotation).
	Recreated []string
}

// Sync applies in.Rendered: staged apply (with health gates, ignore
// rules, force recreate), prune of what left the config, inventory, HC
// status. A failed fetch or render (in.Err) applies and prunes nothing and
// only reports the error on the HC status. A failed apply prunes nothing
// and keeps every inventory entry. Objects the inventory lacks are
// recorded in it before they are created (write-ahead: see ahead), so a
// sync interrupted before it saves its inventory leaves nothing
// untracked. Apply, health-check and prune failures
// are *StageError (errors.As), naming the phase and the stage. Sync never blocks on an operand: a
// component whose dependencies are not healthy is deferred, Result.Waiting
// is set and the caller should sync again after Result.RequeueAfter (or
// on the next watch event).
func (p *Pipeline) Sync(ctx context.Context, in Input) (*Result, error) {
	if in.Rendered == nil {
		res := &Result{Revision: in.Revision, ChangeSet: ssa.NewChangeSet()}
		if in.HC.Name != "" {
			if _, err := p.writeStatus(ctx, in.HC, nil, nil, nil, in.Err, res); err != nil {
				return res, fmt.Errorf("%w (and writing status: %v)", in.Err, err)
			}
		}
		return res, in.Err
	}
	r := in.Rendered
	var hc types.NamespacedName
	if r.HyperConverged != nil {
		hc = types.NamespacedName{Namespace: r.HyperConverged.GetNamespace(), Name: r.HyperConverged.GetName()}
	}
	by := in.Owner
	if by.Name == "" {
		by = hc
	}
	if by.Name == "" {
		return nil, errors.New("reconciler: a render without a HyperConverged needs Input.Owner")
	}
	owner := p.OwnerLabels(by.Namespace, by.Name)
	reader := p.Reader
	if in.LiveReader != nil {
		reader = in.LiveReader
	}
	store := in.Inventory
	if store == nil {
		store = ConfigMapStore{Client: p.Client, Reader: reader, Namespace: by.Namespace, Name: by.Name, FieldManager: p.Options.fieldManager()}
	}
	prev, err := store.Load(ctx)
	if err != nil {
		return nil, err
	}
	live, err := ReadLive(ctx, reader, kinds(r), owner)
	if err != nil {
		return nil, err
	}
	ahead := newAhead(store, prev, r)
	applied, applyErr := p.applyStages(ctx, r, prev.Inventory, live, owner, ahead)
	// The entries are of in.Revision once every stage applied; after a
	// failed stage they are mostly the previous revision's.
	saved := StoredInventory{Inventory: applied.Inventory, Revision: in.Revision}
	if applyErr != nil {
		saved.Revision = prev.Revision
	}
	res := &Result{Revision: in.Revision, ChangeSet: applied.ChangeSet, Inventory: applied.Inventory, Writes: applied.Requests + ahead.writes,
		Components: applied.Components, Waiting: applied.Waiting, Drifted: applied.Drifted, Recreated: applied.Recreated}
	if res.Waiting {
		res.RequeueAfter = p.Options.WaitingRequeue
	}
	if applyErr == nil && p.Options.Prune {
		pruned, err := p.prune(ctx, prev.Inventory, res.Inventory, owner)
		res.ChangeSet.Append(pruned.Entries)
		for _, e := range pruned.Entries {
			if e.Action == ssa.DeletedAction {
				res.Writes++
			}
		}
		if err != nil {
			applyErr = &StageError{Phase: PhasePrune, Err: err}
		}
	}
	if hc.Name != "" {
		if _, err := p.writeStatus(ctx, hc, r, res.Inventory, applied.operands, applyErr, res); err != nil && applyErr == nil {
			applyErr = err
		}
	}
	wrote, err := store.Save(ctx, ahead.saved, saved)
	if wrote {
		res.Writes++
	}
	if err != nil && applyErr == nil {
		applyErr = err
	}
	return res, applyErr
}

// OwnerLabels returns the labels the pipeline puts on every object it
// applies for the owner namespace/name, a HyperConverged or a native
// operator's CR: {"<OwnerGroup>/name": name, "<OwnerGroup>/namespace":
// namespace}, with Options.OwnerGroup (converge.dev by default); prune and
// Uninstall delete only objects that still carry all of them. No render
// needed.
func (p *Pipeline) OwnerLabels(namespace, name string) map[string]string {
	return p.Manager.GetOwnerLabels(name, namespace)
}

// kinds returns the distinct GroupVersionKinds of r's objects.
func kinds(r *graph.Rendered) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, o := range r.Objects() {
		gvk := o.GroupVersionKind()
		if !seen[gvk] {
			seen[gvk] = true
			out = append(out, gvk)
		}
	}
	return out
}
