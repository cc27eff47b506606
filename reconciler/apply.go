package reconciler

import (
	"context"
	"fmt"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/graph"
	"github.com/converge-dev/converge/inventory"
)

// ApplyResult is what one staged apply did.
type ApplyResult struct {
	// ChangeSet has one entry per desired object: created, configured or
	// unchanged.
	ChangeSet *ssa.ChangeSet
	// Inventory is the applied set. After a failed apply it holds the
	// previous inventory plus every object applied before the failure, so
	// nothing converge created is ever lost track of.
	Inventory *inventory.Inventory
	// Requests counts the write requests (SSA PATCH) sent.
	Requests int
}

// applyStages applies r stage by stage. An object is skipped without any
// request when the previous inventory holds the same digest and the live
// object still has the resourceVersion recorded then (nothing, neither
// converge nor anyone else, changed it since). Everything else gets one
// SSA PATCH (force ownership). After each stage the objects applied whose
// health rule is kstatus are waited for (CRDs established, namespaces
// active) before the next stage.
func (p *Pipeline) applyStages(ctx context.Context, r *graph.Rendered, prev *inventory.Inventory, live Live, revision string) (*ApplyResult, error) {
	res := &ApplyResult{ChangeSet: ssa.NewChangeSet(), Inventory: &inventory.Inventory{Revision: revision}}
	prevIdx := prev.Index()
	var hcUID string
	if l, ok := live[inventory.ID(r.HyperConverged)]; ok {
		hcUID = string(l.UID)
	}
	fail := func(err error) (*ApplyResult, error) {
		res.Inventory = mergeInventory(prev, res.Inventory)
		return res, err
	}
	for _, st := range r.Stages {
		var mu sync.Mutex
		var waitSet object.ObjMetadataSet
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(p.Options.Concurrency)
		for _, obj := range st.Objects {
			desired := p.Desired(r, obj, hcUID)
			g.Go(func() error {
				e, action, applied, err := p.applyOne(gctx, desired, prevIdx, live)
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				res.Inventory.Entries = append(res.Inventory.Entries, e)
				res.ChangeSet.Add(ssa.ChangeSetEntry{
					ObjMetadata:  object.UnstructuredToObjMetadata(desired),
					GroupVersion: desired.GroupVersionKind().GroupVersion().String(),
					Subject:      ssaSubject(desired),
					Action:       action,
				})
				if applied != nil {
					res.Requests++
					if inventory.ID(applied) == inventory.ID(r.HyperConverged) {
						hcUID = string(applied.GetUID())
					}
					if action != ssa.UnchangedAction && r.HealthRule(desired.GetKind()) == "kstatus" && !current(applied) {
						waitSet = append(waitSet, object.UnstructuredToObjMetadata(desired))
					}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return fail(fmt.Errorf("stage %s: %w", st.Name, err))
		}
		if len(waitSet) > 0 {
			if err := p.Manager.WaitForSetWithContext(ctx, waitSet, ssa.WaitOptions{
				Interval: p.Options.WaitInterval, Timeout: p.Options.WaitTimeout, FailFast: true,
			}); err != nil {
				return fail(fmt.Errorf("stage %s: health check: %w", st.Name, err))
			}
			// The API server updates what it reconciles itself (a CRD's
			// Established condition, a namespace's phase): record the
			// resourceVersion after the wait so it is not taken for drift.
			if err := p.refreshVersions(ctx, waitSet, res.Inventory); err != nil {
				return fail(fmt.Errorf("stage %s: %w", st.Name, err))
			}
		}
	}
	res.Inventory.Sort()
	return res, nil
}

// applyOne applies desired unless the inventory and the live state show
// it unchanged. It returns the new inventory entry, the action and the
// object the API server returned (nil when skipped).
func (p *Pipeline) applyOne(ctx context.Context, desired *unstructured.Unstructured, prev map[string]inventory.Entry, live Live) (inventory.Entry, ssa.Action, *unstructured.Unstructured, error) {
	id := inventory.ID(desired)
	digest := inventory.Digest(desired)
	l, exists := live[id]
	if pe, ok := prev[id]; ok && exists && pe.Digest == digest && pe.ResourceVersion == l.ResourceVersion {
		return pe, ssa.UnchangedAction, nil, nil
	}
	applied := desired.DeepCopy()
	err := p.Client.Patch(ctx, applied, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership)
	if err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return inventory.Entry{}, "", nil, fmt.Errorf("%s: invalid: %w", ssaSubject(desired), err)
		}
		return inventory.Entry{}, "", nil, fmt.Errorf("%s: apply failed: %w", ssaSubject(desired), err)
	}
	action := ssa.CreatedAction
	if exists {
		action = ssa.ConfiguredAction
		if applied.GetResourceVersion() == l.ResourceVersion {
			action = ssa.UnchangedAction
		}
	}
	return inventory.Entry{ID: id, Version: desired.GetAPIVersion(), Digest: digest,
		ResourceVersion: applied.GetResourceVersion()}, action, applied, nil
}

func ssaSubject(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return fmt.Sprintf("%s/%s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	}
	return fmt.Sprintf("%s/%s", u.GetKind(), u.GetName())
}

// Desired returns obj as converge applies it: with the owner labels of
// r's HyperConverged and, when obj is one the HC controls and hcUID is
// known, a controller ownerReference to the HC.
func (p *Pipeline) Desired(r *graph.Rendered, obj *unstructured.Unstructured, hcUID string) *unstructured.Unstructured {
	u := obj.DeepCopy()
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range p.ownerLabels(r) {
		labels[k] = v
	}
	u.SetLabels(labels)
	if r.OwnedByHC[inventory.ID(u)] && hcUID != "" {
		setControllerRef(u, r.HyperConverged, hcUID)
	}
	return u
}

func setControllerRef(u, hc *unstructured.Unstructured, uid string) {
	t := true
	u.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: hc.GetAPIVersion(), Kind: hc.GetKind(), Name: hc.GetName(),
		UID: types.UID(uid), Controller: &t, BlockOwnerDeletion: &t,
	}})
}

// mergeInventory returns prev plus the entries of applied (applied wins).
func mergeInventory(prev, applied *inventory.Inventory) *inventory.Inventory {
	out := &inventory.Inventory{}
	if prev != nil {
		out.Revision = prev.Revision
	}
	idx := prev.Index()
	for _, e := range applied.Entries {
		idx[e.ID] = e
	}
	for _, e := range idx {
		out.Entries = append(out.Entries, e)
	}
	return out.Sort()
}

// current reports whether kstatus already finds the object the API server
// returned Current (a ConfigMap, a PriorityClass): such objects need no
// wait and no re-read. A fresh CRD (not yet Established) is not.
func current(u *unstructured.Unstructured) bool {
	res, err := status.Compute(u)
	return err == nil && res.Status == status.CurrentStatus
}

// refreshVersions re-reads the resourceVersion of the objects in set and
// records it in inv.
func (p *Pipeline) refreshVersions(ctx context.Context, set object.ObjMetadataSet, inv *inventory.Inventory) error {
	want := map[string]bool{}
	for _, m := range set {
		want[inventory.IDOf(m.Namespace, m.Name, m.GroupKind)] = true
	}
	for i, e := range inv.Entries {
		if !want[e.ID] {
			continue
		}
		u, err := e.Object()
		if err != nil {
			return err
		}
		if err := p.Client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return fmt.Errorf("reading %s after apply: %w", e.ID, err)
		}
		inv.Entries[i].ResourceVersion = u.GetResourceVersion()
	}
	return nil
}
