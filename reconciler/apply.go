package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/operators/hco/hcstatus"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// ApplyResult is what one staged apply did.
type ApplyResult struct {
	// ChangeSet has one entry per desired object: created, configured,
	// unchanged, or skipped (its component was deferred by a health gate).
	ChangeSet *ssa.ChangeSet
	// Inventory is the applied set plus the previous entries of deferred
	// objects. After a failed apply it holds the previous inventory plus
	// every object applied before the failure, so nothing converge
	// created is ever lost track of. Every entry of a rendered object
	// carries its Component.
	Inventory *v1alpha1.Inventory
	// Requests counts the write requests sent (SSA PATCH, and the DELETE
	// of a force recreate).
	Requests int
	// Components is every component's health, in graph order.
	Components []ComponentHealth
	// Waiting is true when a health gate deferred a component.
	Waiting bool
	// Drifted and Recreated: see Result.
	Drifted, Recreated []string

	// operands are the operand CRs read for the health gates, by ID.
	operands map[string]hcstatus.Operand
	// generations are the generations the API server returned for the
	// objects applied, by ID: health does not judge an older copy.
	generations map[string]int64
	// ahead records new objects in the inventory before they are
	// applied; nil records nothing.
	ahead *ahead
}

// applyStages applies r stage by stage. An object is skipped without any
// request when the previous inventory holds the same digest and the live
// object still has the resourceVersion recorded then (nothing, neither
// converge nor anyone else, changed it since). Everything else gets one
// SSA PATCH (force ownership). After each stage the objects applied whose
// health rule is kstatus are waited for (CRDs established, namespaces
// active) before the next stage, and the health of each component of the
// stage is evaluated. With Options.HealthGates a component whose
// dependencies are not all Healthy is deferred: nothing of it is sent,
// and its objects keep their previous inventory entries.
func (p *Pipeline) applyStages(ctx context.Context, r *graph.Rendered, prev *v1alpha1.Inventory, live Live, owner map[string]string, ahead *ahead) (*ApplyResult, error) {
	res := &ApplyResult{ChangeSet: ssa.NewChangeSet(), Inventory: &v1alpha1.Inventory{},
		operands: map[string]hcstatus.Operand{}, generations: map[string]int64{}, ahead: ahead}
	prevIdx := inventory.Index(prev)
	var hcUID string
	if r.HyperConverged != nil {
		if l, ok := live[inventory.ID(r.HyperConverged)]; ok {
			hcUID = string(l.UID)
		}
	}
	nodes := map[string]graph.Node{}
	for _, n := range r.Nodes {
		nodes[n.Name] = n
	}
	health := map[string]ComponentHealth{}
	byID := objectComponents(r)
	fail := func(err error) (*ApplyResult, error) {
		setComponents(res.Inventory, byID)
		res.Inventory = mergeInventory(ahead.base(prev), res.Inventory)
		res.Components = components(r, health)
		return res, err
	}
	for _, st := range r.Stages {
		objs := st.Objects
		var applying []graph.Node
		if len(st.Nodes) > 0 {
			objs = nil
			for _, name := range st.Nodes {
				n := nodes[name]
				if msg := blockedBy(n, health); msg != "" && p.Options.HealthGates {
					health[name] = ComponentHealth{Name: name, Health: Waiting, Message: msg}
					res.Waiting = res.Waiting || len(n.Objects) > 0 // an empty node defers nothing
					p.deferNode(n, prevIdx, res)
					continue
				}
				applying = append(applying, n)
				objs = append(objs, n.Objects...)
			}
		}
		if err := p.applySet(ctx, r, objs, prevIdx, live, owner, &hcUID, res); err != nil {
			phase := PhaseApply
			if errors.Is(err, errHealthCheck) {
				phase = PhaseHealth
			}
			return fail(&StageError{Phase: phase, Stage: st.Name, Err: err})
		}
		for _, n := range applying {
			h, err := p.nodeHealth(ctx, r, n, res.operands, res.generations)
			if err != nil {
				return fail(&StageError{Phase: PhaseHealth, Stage: st.Name, Err: fmt.Errorf("health of %s: %w", n.Name, err)})
			}
			health[n.Name] = h
		}
	}
	res.Components = components(r, health)
	setComponents(res.Inventory, byID)
	sort.Strings(res.Drifted)
	sort.Strings(res.Recreated)
	inventory.Sort(res.Inventory)
	return res, nil
}

// components lists health in r's node order; a node never evaluated
// (after a failure) is left out.
func components(r *graph.Rendered, health map[string]ComponentHealth) []ComponentHealth {
	var out []ComponentHealth
	for _, n := range r.Nodes {
		if h, ok := health[n.Name]; ok {
			out = append(out, h)
		}
	}
	return out
}

// deferNode records n's objects as skipped and carries their previous
// inventory entries over, so they are neither lost nor pruned.
func (p *Pipeline) deferNode(n graph.Node, prev map[string]v1alpha1.InventoryEntry, res *ApplyResult) {
	for _, o := range n.Objects {
		if e, ok := prev[inventory.ID(o)]; ok {
			res.Inventory.Entries = append(res.Inventory.Entries, e)
		}
		res.ChangeSet.Add(ssa.ChangeSetEntry{
			ObjMetadata:  object.UnstructuredToObjMetadata(o),
			GroupVersion: o.GroupVersionKind().GroupVersion().String(),
			Subject:      ssaSubject(o),
			Action:       ssa.SkippedAction,
		})
	}
}

// applySet applies objs in the batches of applyBatchOf — the Namespaces;
// then the objects others name (Secrets, ConfigMaps, network definitions,
// instancetypes and preferences) sent first, with the objects whose
// references are resolved later by a controller (pipelinedKinds: a
// Deployment's pods mount its ConfigMaps long after the apply) sent in the
// same batch as workers free up; then the rest, whose admission may look
// the references up — each batch in parallel (a component's namespaced
// objects may share a stage with their namespace, as the HC does, and a
// VM with the instancetype it names, as the workloads do), then waits for
// the kstatus-rule objects the API server did not already return Current.
// Flux's ssa.ApplyAllStaged applies the last two batches as one.
func (p *Pipeline) applySet(ctx context.Context, r *graph.Rendered, objs []*unstructured.Unstructured, prev map[string]v1alpha1.InventoryEntry, live Live, owner map[string]string, hcUID *string, res *ApplyResult) error {
	var kinds [4][]*unstructured.Unstructured
	for _, o := range objs {
		b := applyBatchOf(o)
		kinds[b] = append(kinds[b], o)
	}
	batches := [][]*unstructured.Unstructured{kinds[0], append(kinds[1], kinds[2]...), kinds[3]}
	var waitSet object.ObjMetadataSet
	for _, batch := range batches {
		if len(batch) == 0 {
			continue
		}
		if err := p.applyBatch(ctx, r, batch, prev, live, owner, hcUID, res, &waitSet); err != nil {
			return err
		}
	}
	if len(waitSet) == 0 {
		return nil
	}
	if err := p.Manager.WaitForSetWithContext(ctx, waitSet, ssa.WaitOptions{
		Interval: p.Options.WaitInterval, Timeout: p.Options.WaitTimeout, FailFast: true,
	}); err != nil {
		return fmt.Errorf("%w of %s: %w", errHealthCheck, subjects(waitSet, 5), err)
	}
	// The API server updates what it reconciles itself (a CRD's
	// Established condition, a namespace's phase): record the
	// resourceVersion after the wait so it is not taken for drift.
	return p.refreshVersions(ctx, waitSet, res.Inventory)
}

// referencedKinds are the kinds other objects name and that must exist
// before them: a VMI's cloud-init and an import's Secrets, ConfigMaps, the
// NetworkAttachmentDefinitions of its networks, the instancetype and
// preference a VM names (KubeVirt's admission looks them up).
var referencedKinds = map[schema.GroupKind]bool{
	{Kind: "Secret"}: true, {Kind: "ConfigMap"}: true,
	{Group: "k8s.cni.cncf.io", Kind: "NetworkAttachmentDefinition"}:                true,
	{Group: "instancetype.kubevirt.io", Kind: "VirtualMachineInstancetype"}:        true,
	{Group: "instancetype.kubevirt.io", Kind: "VirtualMachineClusterInstancetype"}: true,
	{Group: "instancetype.kubevirt.io", Kind: "VirtualMachinePreference"}:          true,
	{Group: "instancetype.kubevirt.io", Kind: "VirtualMachineClusterPreference"}:   true,
}

// pipelinedKinds and pipelinedGroups are what needs no referenced object
// at admission: the workload controllers, whose pods are created later by
// their controller and wait for their ConfigMaps, Secrets and
// ServiceAccounts (kubelet retries the mounts), and objects that name
// others only by string (Services, RBAC, disruption budgets, network
// policies). They go in the batch of the referencedKinds, sent after
// them, not behind a barrier. Pods, KubeVirt's and CDI's kinds, webhook
// configurations and anything unknown stay after the barrier.
var (
	pipelinedKinds = map[schema.GroupKind]bool{
		{Kind: "Service"}: true, {Kind: "ServiceAccount"}: true,
		{Group: "policy", Kind: "PodDisruptionBudget"}:      true,
		{Group: "networking.k8s.io", Kind: "NetworkPolicy"}: true,
	}
	pipelinedGroups = map[string]bool{"apps": true, "batch": true, "rbac.authorization.k8s.io": true}
)

// applyBatchOf gives the kind class of o, in the order applySet sends
// them: 0 for a Namespace, 1 for the referencedKinds, 2 for the
// pipelinedKinds (1 and 2 are one batch), 3 for the rest.
func applyBatchOf(o *unstructured.Unstructured) int {
	gk := o.GroupVersionKind().GroupKind()
	switch {
	case gk == schema.GroupKind{Kind: "Namespace"}:
		return 0
	case referencedKinds[gk]:
		return 1
	case pipelinedKinds[gk] || pipelinedGroups[gk.Group]:
		return 2
	}
	return 3
}

// subjects names the objects of set as "Kind/namespace/name" joined by
// ", ", at most n of them and then "and <k> more".
func subjects(set object.ObjMetadataSet, n int) string {
	var names []string
	for i, m := range set {
		if i == n {
			names = append(names, fmt.Sprintf("and %d more", len(set)-n))
			break
		}
		s := m.GroupKind.Kind + "/" + m.Name
		if m.Namespace != "" {
			s = m.GroupKind.Kind + "/" + m.Namespace + "/" + m.Name
		}
		names = append(names, s)
	}
	return strings.Join(names, ", ")
}

// errHealthCheck marks the error of a failed kstatus wait in applySet
// ("health check: <cause>"), so that applyStages reports it as
// PhaseHealth.
var errHealthCheck = errors.New("health check")

// applyBatch records objs the inventory lacks (res.ahead), then applies
// objs in parallel (Options.Concurrency) and adds the kstatus-rule
// objects not returned Current to waitSet.
func (p *Pipeline) applyBatch(ctx context.Context, r *graph.Rendered, objs []*unstructured.Unstructured, prev map[string]v1alpha1.InventoryEntry, live Live, owner map[string]string, hcUID *string, res *ApplyResult, waitSet *object.ObjMetadataSet) error {
	if err := res.ahead.before(ctx, objs); err != nil {
		return err
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(p.Options.Concurrency, 1))
	for _, obj := range objs {
		desired := p.desired(r, obj, owner, *hcUID)
		g.Go(func() error {
			out, err := p.applyOne(gctx, r, desired, prev, live)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			res.Inventory.Entries = append(res.Inventory.Entries, out.entry)
			res.ChangeSet.Add(ssa.ChangeSetEntry{
				ObjMetadata:  object.UnstructuredToObjMetadata(desired),
				GroupVersion: desired.GroupVersionKind().GroupVersion().String(),
				Subject:      ssaSubject(desired),
				Action:       out.action,
			})
			res.Requests += out.requests
			if out.drifted {
				res.Drifted = append(res.Drifted, out.entry.ID)
			}
			if out.recreated {
				res.Recreated = append(res.Recreated, out.entry.ID)
			}
			if out.applied != nil {
				res.generations[out.entry.ID] = out.applied.GetGeneration()
				if r.HyperConverged != nil && inventory.ID(out.applied) == inventory.ID(r.HyperConverged) {
					*hcUID = string(out.applied.GetUID())
				}
				if out.action != ssa.UnchangedAction && p.waitsFor(r, desired) && !current(out.applied) {
					*waitSet = append(*waitSet, object.UnstructuredToObjMetadata(desired))
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// waitsFor reports whether a stage waits for o to become Current after
// applying it: every kstatus-rule object with Options.Wait, else only the
// CustomResourceDefinitions and Namespaces later stages need.
func (p *Pipeline) waitsFor(r *graph.Rendered, o *unstructured.Unstructured) bool {
	if r.HealthRule(o.GetKind()) != "kstatus" {
		return false
	}
	if p.Options.Wait {
		return true
	}
	gvk := o.GroupVersionKind()
	return (gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition") || (gvk.Group == "" && gvk.Kind == "Namespace")
}

// patchAt sends send as a server-side apply (force ownership). When the
// object exists (exists) it is sent with the resourceVersion it had when
// converge decided to apply it (before) as a precondition, so that the
// resourceVersion the API server returns tells, without a race, whether
// this apply changed the object: the same one when it did not (another
// manager's write is never taken for converge's, nor for drift). When the
// object changed in between (Conflict) its resourceVersion is read again
// and the apply sent again, up to 3 times. The outcome's base is the
// resourceVersion the successful apply was conditioned on ("" when sent
// unconditioned, also when the object turned out to be gone).
func (p *Pipeline) patchAt(ctx context.Context, send *unstructured.Unstructured, exists bool, before string) (applied, error) {
	out := applied{}
	for attempt := 1; ; attempt++ {
		out.applied = send.DeepCopy()
		out.base = ""
		if exists && before != "" {
			out.applied.SetResourceVersion(before)
			out.base = before
		}
		out.requests++
		err := retryNoMatch(ctx, p.Options.DiscoveryWait, p.Options.WaitInterval, func() error {
			return p.Client.Patch(ctx, out.applied, client.Apply, client.FieldOwner(p.Options.fieldManager()), client.ForceOwnership)
		})
		if err == nil || !apierrors.IsConflict(err) || out.base == "" || attempt == 3 {
			return out, err
		}
		cur := &metav1.PartialObjectMetadata{}
		cur.SetGroupVersionKind(send.GroupVersionKind())
		switch gerr := p.Client.Get(ctx, client.ObjectKeyFromObject(send), cur); {
		case apierrors.IsNotFound(gerr):
			exists, before = false, ""
		case gerr != nil:
			return out, fmt.Errorf("%s: reading it again after a conflict: %w", ssaSubject(send), gerr)
		default:
			before = cur.GetResourceVersion()
		}
	}
}

// applied is the outcome of one applyOne.
type applied struct {
	entry  v1alpha1.InventoryEntry
	action ssa.Action
	// applied is the object the API server returned; nil when skipped.
	applied *unstructured.Unstructured
	// requests counts write requests sent.
	requests int
	// drifted: re-applied with an unchanged digest because someone else
	// changed a field converge owns.
	drifted bool
	// recreated: deleted and created again (immutable field, force).
	recreated bool
	// base is the resourceVersion the apply was conditioned on (patchAt).
	base string
}

// applyOne applies desired unless the inventory and the live state show
// it unchanged. The inventory digest is the rendered object's; ignore
// rules (r.IgnorePaths) shape what is sent for an existing object. An
// apply refused for an immutable field is retried as delete and create
// when the object opts in with ForceAnnotation.
func (p *Pipeline) applyOne(ctx context.Context, r *graph.Rendered, desired *unstructured.Unstructured, prev map[string]v1alpha1.InventoryEntry, live Live) (applied, error) {
	id := inventory.ID(desired)
	digest := inventory.Digest(desired)
	l, exists := live[id]
	pe, had := prev[id]
	if had && exists && pe.Digest == digest && pe.ResourceVersion == l.ResourceVersion {
		return applied{entry: pe, action: ssa.UnchangedAction}, nil
	}
	before := l.ResourceVersion
	send := desired
	if paths := r.IgnorePaths(desired); len(paths) > 0 && exists {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(desired.GroupVersionKind())
		err := p.Client.Get(ctx, client.ObjectKeyFromObject(desired), cur)
		switch {
		case apierrors.IsNotFound(err):
			exists = false
		case err != nil:
			return applied{}, fmt.Errorf("%s: reading for ignore rules: %w", ssaSubject(desired), err)
		default:
			before = cur.GetResourceVersion()
			if send, err = withIgnored(desired, cur, paths); err != nil {
				return applied{}, err
			}
		}
	}
	out, err := p.patchAt(ctx, send, exists, before)
	if err == nil && out.base != "" {
		before = out.base
	} else if err == nil && exists && out.base == "" {
		exists = false // deleted since the live state was read: created again
	}
	if err != nil && isImmutable(err) {
		force, ferr := p.forceAllowed(ctx, desired)
		if ferr != nil {
			return applied{}, ferr
		}
		if !force {
			return applied{}, fmt.Errorf("%s: immutable field changed: the API server refuses the update; annotate the object %s: %s (in the config, or `kubectl annotate` the live object) to let converge delete and recreate it: %w",
				ssaSubject(desired), ForceAnnotation, Enabled, err)
		}
		// A new object: ignore rules do not apply on create.
		if out.applied, err = p.recreate(ctx, desired); err != nil {
			return applied{}, err
		}
		out.requests, out.recreated, exists = 3, true, false
	}
	if err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return applied{}, fmt.Errorf("%s: invalid: %w", ssaSubject(desired), err)
		}
		return applied{}, fmt.Errorf("%s: apply failed: %w", ssaSubject(desired), err)
	}
	rv := out.applied.GetResourceVersion()
	if p.Options.Wrote != nil {
		p.Options.Wrote(id, rv)
	}
	out.action = ssa.CreatedAction
	if exists {
		out.action = ssa.ConfiguredAction
		// Nothing changed when the server returns the resourceVersion seen
		// before, or the one converge itself recorded last (a lagging
		// cache).
		if rv == before || (had && rv == pe.ResourceVersion) {
			out.action = ssa.UnchangedAction
		}
		out.drifted = had && pe.Digest == digest && out.action == ssa.ConfiguredAction
	} else if had && pe.Digest == digest && !out.recreated {
		out.drifted = true // someone deleted it
	}
	out.entry = v1alpha1.InventoryEntry{ID: id, Version: desired.GetAPIVersion(), Digest: digest, ResourceVersion: rv}
	return out, nil
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
	return p.desired(r, obj, p.OwnerLabels(r.HyperConverged.GetNamespace(), r.HyperConverged.GetName()), hcUID)
}

// desired returns obj with the owner labels and, when obj is one the HC
// controls and hcUID is known, a controller ownerReference to the HC.
func (p *Pipeline) desired(r *graph.Rendered, obj *unstructured.Unstructured, owner map[string]string, hcUID string) *unstructured.Unstructured {
	u := obj.DeepCopy()
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range owner {
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
func mergeInventory(prev, applied *v1alpha1.Inventory) *v1alpha1.Inventory {
	out := &v1alpha1.Inventory{}
	idx := inventory.Index(prev)
	for _, e := range applied.Entries {
		idx[e.ID] = e
	}
	for _, e := range idx {
		out.Entries = append(out.Entries, e)
	}
	return inventory.Sort(out)
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
func (p *Pipeline) refreshVersions(ctx context.Context, set object.ObjMetadataSet, inv *v1alpha1.Inventory) error {
	want := map[string]bool{}
	for _, m := range set {
		want[inventory.IDOf(m.Namespace, m.Name, m.GroupKind)] = true
	}
	for i, e := range inv.Entries {
		if !want[e.ID] {
			continue
		}
		u, err := inventory.Object(e)
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
