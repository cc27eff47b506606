package reconciler

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/operators/hco/hcstatus"
)

// Refresh recomputes what a Sync of in.Rendered reports, from the live
// state, without applying or pruning anything: the health of every
// component, judged as Sync judges it after an apply (health gates
// included), and the HyperConverged's status, written when it changed,
// with the HC's new resourceVersion recorded in the inventory
// (in.Inventory, required, saved only when that changed).
//
// It is for a caller that knows only status changed since a Sync of
// in.Rendered applied every stage: an operator's status update, not a
// change to anything converge applies. A Result with Waiting set means a
// health gate would now defer a component, so a Sync would not apply the
// same set: the caller must Sync instead (Refresh then wrote nothing).
// The Result's ChangeSet is empty; Writes counts the HC status write.
// Errors are those of reading the live objects and of writing the HC
// status.
func (p *Pipeline) Refresh(ctx context.Context, in Input) (*Result, error) {
	r := in.Rendered
	if r == nil || r.HyperConverged == nil {
		return nil, errors.New("reconciler: Refresh needs a rendered HyperConverged")
	}
	if in.Inventory == nil {
		return nil, errors.New("reconciler: Refresh needs Input.Inventory")
	}
	prev, err := in.Inventory.Load(ctx)
	if err != nil {
		return nil, err
	}
	res := &Result{Revision: in.Revision, ChangeSet: ssa.NewChangeSet(), Inventory: prev.Inventory.DeepCopy()}
	if res.Inventory == nil {
		res.Inventory = &v1alpha1.Inventory{}
	}
	ops := map[string]hcstatus.Operand{}
	health, waiting, err := p.health(ctx, r, ops)
	res.Components = components(r, health)
	if err != nil || waiting {
		res.Waiting = waiting
		return res, err
	}
	hc := types.NamespacedName{Namespace: r.HyperConverged.GetNamespace(), Name: r.HyperConverged.GetName()}
	wrote, err := p.writeStatus(ctx, hc, r, res.Inventory, ops, nil, res)
	if err != nil || !wrote {
		return res, err
	}
	if _, err := in.Inventory.Save(ctx, prev, StoredInventory{Inventory: res.Inventory, Revision: prev.Revision}); err != nil {
		return res, err
	}
	return res, nil
}

// health judges every component of r in stage order as applyStages does
// after applying it (nodeHealth; no generation applied this sync), with
// the health gates of Options.HealthGates: a component whose
// dependencies are not all Healthy is Waiting, and waiting reports
// whether one that has objects is. The operands read are recorded in ops.
func (p *Pipeline) health(ctx context.Context, r *graph.Rendered, ops map[string]hcstatus.Operand) (map[string]ComponentHealth, bool, error) {
	nodes := make(map[string]graph.Node, len(r.Nodes))
	for _, n := range r.Nodes {
		nodes[n.Name] = n
	}
	health := map[string]ComponentHealth{}
	waiting := false
	for _, st := range r.Stages {
		for _, name := range st.Nodes {
			n := nodes[name]
			if msg := blockedBy(n, health); msg != "" && p.Options.HealthGates {
				health[name] = ComponentHealth{Name: name, Health: Waiting, Message: msg}
				waiting = waiting || len(n.Objects) > 0
				continue
			}
			h, err := p.nodeHealth(ctx, r, n, ops, nil)
			if err != nil {
				return health, waiting, fmt.Errorf("health of %s: %w", name, err)
			}
			health[name] = h
		}
	}
	return health, waiting, nil
}
