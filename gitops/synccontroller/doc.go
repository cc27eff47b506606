// Package synccontroller is the controller of converge.dev/v1alpha1 Sync:
// for each Sync it fetches the config repository (gitops/source), renders
// the component graph (internal/graph) with the facts of the target cluster and
// drives it into that cluster with the reconciler.Pipeline, keeping the
// inventory in the Sync's status.inventory. It follows Flux's
// kustomize-controller (fluxcd/kustomize-controller internal/controller/
// kustomization_controller.go): a finalizer and a deletion policy,
// spec.suspend, spec.dependsOn, remote targets from a kubeconfig Secret,
// service-account impersonation, kstatus-compatible conditions
// (Ready/Reconciling/Stalled), one Kubernetes event per reconcile that
// changed something, and a jittered requeue after spec.interval.
//
// Every target cluster (the controller's own included) gets one
// controller-runtime cluster.Cluster whose cache holds, metadata only,
// just the objects carrying converge's owner labels (plus the Nodes the
// facts need): the Pipeline reads live state from it and its watches
// enqueue the Syncs that applied an object as soon as someone changes it.
// The events of a Sync's own writes (the resourceVersions its apply got
// back, ownwrites.go) enqueue nothing: one commit is one reconcile.
//
// A reconcile reads as its stages (stages.go): fetch (target, source and
// its Secrets, Fetcher.Fetch) → render (facts, graph) → apply
// (Pipeline.Sync, health), each returning a value or a classified
// failure, collected in one outcome; report (report.go) then writes the
// conditions, history, revisions, event, metrics and log line from that
// outcome in one place, as kustomize-controller finalizes its status from
// the reconcile's result. The one status write before that is the
// "Progressing" patch of a new revision, sent while it renders and
// finished before the apply.
//
// Condition semantics (decided in report):
//   - Ready=True ReconciliationSucceeded: the last revision is applied and
//     every stage passed its health gate; Reconciling and Stalled absent.
//   - Reconciling=True Progressing while a new revision or generation is
//     being rendered and applied (patched before the apply starts);
//     WaitingForHealth
//     while components wait for their dependencies' health.
//   - Ready=False with a failure reason and Reconciling=True
//     ProgressingWithRetry for errors a retry may fix: FetchFailed,
//     AuthenticationFailed (the Git server refused the credentials or
//     could not be authenticated; a rotated Secret is read on the retry),
//     ApplyFailed, HealthCheckFailed, PruneFailed (by the phase of the
//     reconciler.StageError), TargetFailed (unreachable).
//   - Ready=False and Stalled=True with the same reason for errors a retry
//     will not fix without a change to the Sync, its Secrets or the
//     repository: a refused signature (VerificationFailed), a
//     render/schema error, a missing Secret, an incomplete credentials
//     Secret (AuthenticationFailed) or a malformed kubeconfig. The Sync is still retried every
//     spec.interval (a new commit may fix it).
//   - spec.suspend: nothing is fetched, applied or corrected; Ready keeps
//     its status and gets reason Suspended with the last applied revision
//     in its message (Flux leaves status untouched; converge says why it
//     no longer moves).
package synccontroller
