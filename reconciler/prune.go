package reconciler

import (
	"context"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/inventory"
)

// prune deletes the objects of prev that next no longer holds. Only
// objects that carry converge's owner labels for this HC are deleted;
// objects annotated or labelled converge.dev/prune=disabled are kept.
// Entries whose delete failed are added back to next, so a later
// reconcile retries them. It returns what it did and the first error.
func (p *Pipeline) prune(ctx context.Context, prev, next *inventory.Inventory, owner map[string]string) (*ssa.ChangeSet, error) {
	stale := inventory.Stale(prev, next)
	cs := ssa.NewChangeSet()
	if len(stale) == 0 {
		return cs, nil
	}
	var objs []*unstructured.Unstructured
	byID := map[string]inventory.Entry{}
	for _, e := range stale {
		u, err := e.Object()
		if err != nil {
			continue // a malformed entry cannot name an object: drop it
		}
		objs = append(objs, u)
		byID[e.ID] = e
	}
	opts := ssa.DefaultDeleteOptions()
	opts.Inclusions = owner
	opts.Exclusions = map[string]string{PruneAnnotation: "disabled"}
	var firstErr error
	for _, u := range objs {
		entry, err := p.Manager.Delete(ctx, u, opts)
		if entry != nil {
			cs.Add(*entry)
		}
		if err != nil {
			next.Entries = append(next.Entries, byID[inventory.ID(u)])
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	next.Sort()
	return cs, firstErr
}
