package reconciler

import (
	"context"
	"sort"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// prune deletes the objects of prev that next no longer holds, CRDs and
// namespaces last (the reverse of ssa's apply order). The rules, as Flux's
// kustomize-controller prune:
//
//   - Only inventory entries are candidates: an object carrying
//     converge's owner labels that converge never recorded is never
//     deleted.
//   - An entry whose live object lost any owner label (someone took it
//     over) is not deleted, and is dropped from the inventory: converge
//     no longer claims it, and relabelling it later will not get it
//     deleted by a sync that happens to run then.
//   - An object annotated or labelled converge.dev/prune=disabled is not
//     deleted and is dropped from the inventory (left to the cluster).
//   - An object whose delete fails stays in next, so a later sync
//     retries it; the error names it first.
//
// It returns what it did (deleted or skipped per object) and the first
// error.
func (p *Pipeline) prune(ctx context.Context, prev, next *v1alpha1.Inventory, owner map[string]string) (*ssa.ChangeSet, error) {
	stale := inventory.Stale(prev, next)
	cs := ssa.NewChangeSet()
	if len(stale) == 0 {
		return cs, nil
	}
	objs, byID := entryObjects(stale)
	var firstErr error
	for _, u := range objs {
		if err := p.deleteOne(ctx, u, owner, cs); err != nil {
			next.Entries = append(next.Entries, byID[inventory.ID(u)])
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	inventory.Sort(next)
	return cs, firstErr
}

// entryObjects returns skeleton objects for entries in reverse ssa apply
// order (CRDs and namespaces last), and the entries by ID. A malformed
// entry cannot name an object and is dropped.
func entryObjects(entries []v1alpha1.InventoryEntry) ([]*unstructured.Unstructured, map[string]v1alpha1.InventoryEntry) {
	var objs []*unstructured.Unstructured
	byID := map[string]v1alpha1.InventoryEntry{}
	for _, e := range entries {
		u, err := inventory.Object(e)
		if err != nil {
			continue
		}
		objs = append(objs, u)
		byID[e.ID] = e
	}
	sort.Stable(sort.Reverse(ssa.SortableUnstructureds(objs)))
	return objs, byID
}

// deleteOne deletes u with the prune rules (owner labels required,
// converge.dev/prune=disabled kept) and records the action in cs.
func (p *Pipeline) deleteOne(ctx context.Context, u *unstructured.Unstructured, owner map[string]string, cs *ssa.ChangeSet) error {
	opts := ssa.DefaultDeleteOptions()
	opts.Inclusions = owner
	opts.Exclusions = map[string]string{PruneAnnotation: Disabled}
	entry, err := p.Manager.Delete(ctx, u, opts)
	if entry != nil {
		cs.Add(*entry)
	}
	return err
}
