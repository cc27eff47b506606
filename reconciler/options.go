// Package reconciler drives a rendered component graph into a cluster:
// staged server-side apply with health gates between components, drift
// reporting, ignore rules, force recreate of objects with immutable
// changes, an inventory of what was applied, safe pruning of what the
// config no longer holds, uninstall, and the HyperConverged's status. The
// Pipeline is shared by `converge apply` and converge-controller, which
// adds a Git source, an interval and watches.
package reconciler

import (
	"time"

	"github.com/fluxcd/pkg/ssa"
)

// Labels and annotations converge uses on the objects it applies.
const (
	// FieldManager is the server-side apply field manager.
	FieldManager = "converge"
	// OwnerGroup prefixes the ownership labels converge.dev/name and
	// converge.dev/namespace (the HC's name and namespace).
	OwnerGroup = "converge.dev"
	// PruneAnnotation set to "disabled" (as an annotation or a label)
	// keeps an object when it leaves the config or on Uninstall (as
	// Flux's kustomize.toolkit.fluxcd.io/prune).
	PruneAnnotation = "converge.dev/prune"
	// ForceAnnotation set to "enabled", on the desired object or on the
	// live one (kubectl annotate), lets converge delete and recreate the
	// object when an apply fails on an immutable field (as Flux's
	// kustomize.toolkit.fluxcd.io/force).
	ForceAnnotation = "converge.dev/force"
	// Disabled and Enabled are the values of PruneAnnotation and
	// ForceAnnotation.
	Disabled = "disabled"
	Enabled  = "enabled"
)

// Options tunes the pipeline.
type Options struct {
	// Concurrency is how many objects of a stage are applied in parallel.
	Concurrency int
	// WaitTimeout bounds each stage's kstatus wait, and the wait for an
	// object deleted for a force recreate to be gone.
	WaitTimeout time.Duration
	// WaitInterval is the poll interval of those waits.
	WaitInterval time.Duration
	// Prune deletes objects that left the config.
	Prune bool
	// HealthGates applies a component only when every component it
	// dependsOn is healthy (kstatus Current; for "conditions" operands
	// Available=True and Degraded not True). A component whose
	// dependencies are not healthy is deferred to a later sync; the
	// pipeline never blocks waiting for an operand.
	HealthGates bool
	// WaitingRequeue is the requeue Result.RequeueAfter suggests while a
	// component is deferred. Operand status changes also trigger a sync
	// through the metadata watches, usually much sooner.
	WaitingRequeue time.Duration
	// Wait waits, after each stage, for every applied object whose health
	// rule is kstatus and which the API server did not return Current.
	// Without it a stage waits only for what the next stages need to be
	// accepted at all — CustomResourceDefinitions established, Namespaces
	// active — as Flux's ApplyAllStaged does with wait disabled (a Sync's
	// spec.wait: false).
	Wait bool
	// FieldManager is the server-side apply field manager of every write;
	// empty means FieldManager ("converge"). converge's native operators
	// use their own ("converge-virt-operator", …).
	FieldManager string
	// OwnerGroup prefixes the ownership labels <OwnerGroup>/name and
	// <OwnerGroup>/namespace that mark what the pipeline applied and that
	// prune requires; empty means OwnerGroup ("converge.dev"). Each native
	// operator has its own, so its roles are never taken for the Sync's.
	OwnerGroup string
	// DiscoveryWait bounds how long an apply refused with "no matches for
	// kind" is retried (every WaitInterval, the client's REST mapper
	// reloading the group's discovery each time) before it fails: the API
	// server serves a CRD's kind a moment after the CRD is established,
	// and after a restart its discovery can lag behind CRDs that exist.
	// Zero or negative tries once.
	DiscoveryWait time.Duration
	// Wrote, when set, is called after each write the pipeline makes to
	// an object it applies — the SSA PATCH (also one that changed
	// nothing), the create of a force recreate, the HyperConverged's
	// status — with the object's inventory ID and the resourceVersion the
	// API server returned. It may be called from several goroutines at
	// once. converge-controller uses it to tell the watch events of its
	// own writes from drift.
	Wrote func(id, resourceVersion string)
}

// fieldManager gives o.FieldManager, or FieldManager when empty.
func (o Options) fieldManager() string {
	if o.FieldManager != "" {
		return o.FieldManager
	}
	return FieldManager
}

// ownerGroup gives o.OwnerGroup, or OwnerGroup when empty.
func (o Options) ownerGroup() string {
	if o.OwnerGroup != "" {
		return o.OwnerGroup
	}
	return OwnerGroup
}

// DefaultOptions returns concurrency 16, a 2-minute wait per stage polled
// every 500ms, pruning on, health gates on, waits on, a 15s requeue
// while waiting and a 10s discovery wait.
func DefaultOptions() Options {
	return Options{Concurrency: 16, WaitTimeout: 2 * time.Minute, WaitInterval: 500 * time.Millisecond,
		Prune: true, HealthGates: true, Wait: true, WaitingRequeue: 15 * time.Second, DiscoveryWait: 10 * time.Second}
}

// Owner is converge's ssa.Owner.
var Owner = ssa.Owner{Field: FieldManager, Group: OwnerGroup}
