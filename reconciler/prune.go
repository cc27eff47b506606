package reconciler

import (
	"context"
	"fmt"
	"sort"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
//   - An entry whose kind the cluster no longer serves went with its
//     CustomResourceDefinition (the API server deletes a CRD's objects
//     with it, as when Tekton is uninstalled under the tasks): it is
//     recorded as deleted and dropped from the inventory. fluxcd/pkg/ssa's
//     Delete fails on it, and the sync would fail on every run.
//   - An object whose delete fails stays in next, so a later sync
//     retries it; the error names it first.
//   - A Namespace is deleted last, after the objects of the same prune,
//     and only when deleting it deletes nothing else converge would not:
//     no object the config still declares is in it (next), no object
//     this prune left to the cluster (converge.dev/prune: disabled), and
//     no guest or disk — VirtualMachine, VirtualMachineInstance,
//     DataVolume, PersistentVolumeClaim — that neither this prune deletes
//     nor another object owns (ownerReferences: a VMI of a VM, the PVC of
//     a DataVolume go with their owner). Otherwise it stays, in next, and
//     the error names what holds it (see namespaceHeld): Flux and Argo CD
//     delete such a namespace with everything in it.
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
	// deleted and kept: the objects this prune deleted and the ones it
	// left to the cluster (converge.dev/prune: disabled, owner labels
	// removed), by inventory ID.
	deleted, kept := map[string]bool{}, map[string]bool{}
	for _, u := range objs {
		id := inventory.ID(u)
		if isNamespace(u) {
			held, err := p.namespaceHeld(ctx, u, owner, next, deleted, kept)
			if err == nil && held != "" {
				err = fmt.Errorf("Namespace %s: not deleted: it still holds %s, which deleting it would delete too; delete or move them, or annotate the Namespace %s: %s to leave it to the cluster", u.GetName(), held, PruneAnnotation, Disabled)
			}
			if err != nil {
				cs.Add(ssa.ChangeSetEntry{ObjMetadata: object.UnstructuredToObjMetadata(u), GroupVersion: u.GroupVersionKind().GroupVersion().String(),
					Subject: ssaSubject(u), Action: ssa.SkippedAction})
				next.Entries = append(next.Entries, byID[id])
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
		}
		n := len(cs.Entries)
		err := p.deleteOne(ctx, u, owner, cs)
		if len(cs.Entries) > n {
			switch cs.Entries[len(cs.Entries)-1].Action {
			case ssa.DeletedAction:
				deleted[id] = true
			case ssa.SkippedAction:
				kept[id] = true
			}
		}
		if err != nil {
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

func isNamespace(u *unstructured.Unstructured) bool {
	return u.GroupVersionKind().GroupKind() == schema.GroupKind{Kind: "Namespace"}
}

// guestKinds are the kinds namespaceHeld looks for in a Namespace about to
// be pruned: what holds a guest or its data.
var guestKinds = []schema.GroupVersionKind{
	{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"},
	{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachineInstance"},
	{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"},
	{Version: "v1", Kind: "PersistentVolumeClaim"},
}

// namespaceHeld names (up to 5, as "Kind/namespace/name" and "and N
// more") what in the Namespace u would keep it from being pruned: the
// entries of next in it (objects the config still declares), the objects
// of it this prune kept (kept, by inventory ID), and the guestKinds
// objects in it (listed from the API, metadata only) that no
// ownerReference ties to another object, that are not being deleted and
// that this prune did not delete (deleted). "" when nothing holds it, and
// when the prune rules would not delete the Namespace anyway (gone, not
// carrying owner's labels, converge.dev/prune: disabled); kinds the
// cluster does not serve hold nothing.
func (p *Pipeline) namespaceHeld(ctx context.Context, u *unstructured.Unstructured, owner map[string]string, next *v1alpha1.Inventory, deleted, kept map[string]bool) (string, error) {
	ns := u.GetName()
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	switch err := p.Client.Get(ctx, client.ObjectKey{Name: ns}, live); {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("Namespace %s: reading it before pruning it: %w", ns, err)
	}
	for k, v := range owner {
		if live.GetLabels()[k] != v {
			return "", nil
		}
	}
	if live.GetLabels()[PruneAnnotation] == Disabled || live.GetAnnotations()[PruneAnnotation] == Disabled {
		return "", nil
	}
	var held object.ObjMetadataSet
	add := func(id string) {
		if ens, name, gk, err := inventory.ParseID(id); err == nil && ens == ns {
			held = append(held, object.ObjMetadata{Namespace: ns, Name: name, GroupKind: gk})
		}
	}
	for _, e := range next.Entries {
		add(e.ID)
	}
	for id := range kept {
		add(id)
	}
	for _, gvk := range guestKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := p.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return "", fmt.Errorf("Namespace %s: listing its %ss before pruning it: %w", ns, gvk.Kind, err)
		}
		for _, it := range list.Items {
			id := inventory.IDOf(ns, it.GetName(), gvk.GroupKind())
			if len(it.GetOwnerReferences()) > 0 || it.GetDeletionTimestamp() != nil || deleted[id] || kept[id] {
				continue
			}
			held = append(held, object.ObjMetadata{Namespace: ns, Name: it.GetName(), GroupKind: gvk.GroupKind()})
		}
	}
	if len(held) == 0 {
		return "", nil
	}
	sort.Sort(ssa.SortableMetas(held))
	return subjects(held, 5), nil
}

// deleteOne deletes u with the prune rules (owner labels required,
// converge.dev/prune=disabled kept) and records the action in cs.
func (p *Pipeline) deleteOne(ctx context.Context, u *unstructured.Unstructured, owner map[string]string, cs *ssa.ChangeSet) error {
	opts := ssa.DefaultDeleteOptions()
	opts.Inclusions = owner
	opts.Exclusions = map[string]string{PruneAnnotation: Disabled}
	entry, err := p.Manager.Delete(ctx, u, opts)
	if meta.IsNoMatchError(err) && entry != nil {
		entry.Action, err = ssa.DeletedAction, nil
	}
	if entry != nil {
		cs.Add(*entry)
	}
	return err
}
