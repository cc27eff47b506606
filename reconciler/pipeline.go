package reconciler

import (
	"context"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/graph"
	"github.com/converge-dev/converge/inventory"
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
	m := ssa.NewResourceManager(c, poller, Owner)
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
	// after the rendered HC in its namespace.
	Inventory InventoryStore
}

// Result is what one sync did.
type Result struct {
	Revision string
	// ChangeSet lists every desired object (created, configured,
	// unchanged) then every pruned one (deleted, skipped).
	ChangeSet *ssa.ChangeSet
	// Inventory is the inventory saved.
	Inventory *inventory.Inventory
	// Conditions are the HC conditions written.
	Conditions []metav1.Condition
	// Writes counts the write requests sent to the API server.
	Writes int
}

// Sync applies in.Rendered: staged apply, prune of what left the config,
// inventory, HC status. A failed fetch or render (in.Err) applies and
// prunes nothing and only reports the error on the HC status. A failed
// apply prunes nothing and keeps every inventory entry.
func (p *Pipeline) Sync(ctx context.Context, in Input) (*Result, error) {
	if in.Rendered == nil {
		res := &Result{Revision: in.Revision, ChangeSet: ssa.NewChangeSet()}
		if in.HC.Name != "" {
			if _, err := p.writeStatus(ctx, in.HC, nil, nil, in.Err, res); err != nil {
				return res, fmt.Errorf("%w (and writing status: %v)", in.Err, err)
			}
		}
		return res, in.Err
	}
	r := in.Rendered
	hc := types.NamespacedName{Namespace: r.HyperConverged.GetNamespace(), Name: r.HyperConverged.GetName()}
	owner := p.ownerLabels(r)
	store := in.Inventory
	if store == nil {
		store = ConfigMapStore{Client: p.Client, Reader: p.Reader, Namespace: hc.Namespace, Name: hc.Name}
	}
	prev, err := store.Load(ctx)
	if err != nil {
		return nil, err
	}
	live, err := ReadLive(ctx, p.Reader, kinds(r), owner)
	if err != nil {
		return nil, err
	}
	applied, applyErr := p.applyStages(ctx, r, prev, live, in.Revision)
	res := &Result{Revision: in.Revision, ChangeSet: applied.ChangeSet, Inventory: applied.Inventory, Writes: applied.Requests}
	if applyErr == nil && p.Options.Prune {
		pruned, err := p.prune(ctx, prev, res.Inventory, owner)
		res.ChangeSet.Append(pruned.Entries)
		for _, e := range pruned.Entries {
			if e.Action == ssa.DeletedAction {
				res.Writes++
			}
		}
		applyErr = err
	}
	if _, err := p.writeStatus(ctx, hc, r, res.Inventory, applyErr, res); err != nil && applyErr == nil {
		applyErr = err
	}
	wrote, err := store.Save(ctx, prev, res.Inventory)
	if wrote {
		res.Writes++
	}
	if err != nil && applyErr == nil {
		applyErr = err
	}
	return res, applyErr
}

func (p *Pipeline) ownerLabels(r *graph.Rendered) map[string]string {
	return p.Manager.GetOwnerLabels(r.HyperConverged.GetName(), r.HyperConverged.GetNamespace())
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
