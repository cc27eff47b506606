package reconciler

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// Uninstall deletes every object of the inventory in store, for a Sync
// whose deletionPolicy is Delete (and `converge` uninstall verbs). It
// needs no render: owner are the labels every object must still carry
// (OwnerLabels of the HC). The prune rules apply: an object without all
// owner labels, or with converge.dev/prune=disabled, is kept in the
// cluster and dropped from the inventory.
//
// Order, in phases: the workloads (entries of graph.WorkloadsComponent
// but their Namespaces: VMs go while the VM controller the stack runs is
// still there to remove their finalizers), then the operand objects
// (everything but the kinds below, in reverse ssa apply order), then the
// HyperConverged — each phase waited for until gone
// (Options.WaitTimeout), so operators can run their finalizers while
// their CRDs still exist — then Namespaces, then
// CustomResourceDefinitions last (neither waited for: a namespace's
// contents are removed by the namespace controller). A phase with a
// failed delete or a wait timeout stops the uninstall: what failed and
// every object of the later phases stay in the inventory, which is saved
// (an empty one deletes a ConfigMapStore's ConfigMap). It returns what it
// did per object (deleted, skipped) and the first error, which names the
// object.
func (p *Pipeline) Uninstall(ctx context.Context, store InventoryStore, owner map[string]string) (*ssa.ChangeSet, error) {
	cs := ssa.NewChangeSet()
	prev, err := store.Load(ctx)
	if err != nil {
		return cs, err
	}
	if prev.Inventory == nil || len(prev.Inventory.Entries) == 0 {
		return cs, nil
	}
	objs, byID := entryObjects(prev.Inventory.Entries)
	phases := make([][]*unstructured.Unstructured, 5)
	for _, u := range objs {
		ph := uninstallPhase(u.GetKind(), byID[inventory.ID(u)].Component)
		phases[ph] = append(phases[ph], u)
	}
	left := &v1alpha1.Inventory{}
	keep := func(us ...*unstructured.Unstructured) {
		for _, u := range us {
			left.Entries = append(left.Entries, byID[inventory.ID(u)])
		}
	}
	var firstErr error
	for i, phase := range phases {
		if firstErr != nil {
			keep(phase...)
			continue
		}
		var deleted []*unstructured.Unstructured
		for _, u := range phase {
			err := p.deleteOne(ctx, u, owner, cs)
			if err != nil {
				keep(u)
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			if e := cs.Entries[len(cs.Entries)-1]; e.Action == ssa.DeletedAction {
				deleted = append(deleted, u)
			}
		}
		if firstErr != nil || i >= 3 {
			continue
		}
		for _, u := range deleted {
			if err := p.waitGone(ctx, u); err != nil {
				keep(u)
				if firstErr == nil {
					firstErr = fmt.Errorf("uninstall: %w", err)
				}
			}
		}
	}
	inventory.Sort(left)
	if _, err := store.Save(ctx, prev, StoredInventory{Inventory: left, Revision: prev.Revision}); err != nil && firstErr == nil {
		firstErr = err
	}
	return cs, firstErr
}

// uninstallPhase orders objects for Uninstall by kind and component:
// workloads 0, operands 1, the HyperConverged 2, Namespaces 3, CRDs 4.
func uninstallPhase(kind, component string) int {
	switch kind {
	case hcGVK.Kind:
		return 2
	case "Namespace":
		return 3
	case "CustomResourceDefinition":
		return 4
	}
	if component == graph.WorkloadsComponent {
		return 0
	}
	return 1
}
