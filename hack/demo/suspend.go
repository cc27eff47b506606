package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// migrationsPath is the KubeVirt field the suspended commit changes.
var migrationsPath = []string{"spec", "configuration", "migrations", "parallelMigrationsPerCluster"}

// events shows what converge-controller did as the Sync's Kubernetes
// Events, once the drift correction's event was written (the event
// recorder writes asynchronously; at most 10s).
func (d *demo) events(ctx context.Context) error {
	say("what converge-controller did, as Kubernetes Events of the Sync")
	deadline := time.Now().Add(10 * time.Second)
	for !d.hasEvent(ctx, v1alpha1.DriftCorrectedReason) {
		if time.Now().After(deadline) {
			return fmt.Errorf("Sync %s/%s: no %s event within 10s of the drift", syncNS, syncName, v1alpha1.DriftCorrectedReason)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return d.show(ctx, "events", syncName, "-n", syncNS)
}

// hasEvent reports whether an Event with reason exists on the Sync.
func (d *demo) hasEvent(ctx context.Context, reason string) bool {
	list := &corev1.EventList{}
	if err := d.env.Client.List(ctx, list, client.InNamespace(syncNS)); err != nil {
		return false
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == v1alpha1.SyncKind && e.InvolvedObject.Name == syncName && e.Reason == reason {
			return true
		}
	}
	return false
}

// suspend suspends the Sync, commits a change and shows it is not
// applied, then resumes the Sync and shows it applied.
func (d *demo) suspend(ctx context.Context) error {
	say("suspend: converge stops reconciling the Sync (and correcting drift) until it is resumed")
	if err := d.show(ctx, "suspend", "sync", syncName, "-n", syncNS); err != nil {
		return err
	}
	if _, err := d.waitSync(ctx, "Suspended", 30*time.Second, func(s *v1alpha1.Sync) bool {
		r := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition)
		return s.Status.ObservedGeneration == s.Generation && r != nil && r.Reason == v1alpha1.SuspendedReason
	}); err != nil {
		return err
	}
	sha, err := d.repo.edit(hcFile, "parallelMigrationsPerCluster: 5", "parallelMigrationsPerCluster: 6", "six parallel migrations")
	if err != nil {
		return err
	}
	note("committed %s (liveMigrationConfig.parallelMigrationsPerCluster: 5 → 6)", d.repo.head())
	if _, err := d.converge(ctx, "reconcile", "sync", syncName, "-n", syncNS); err == nil {
		return fmt.Errorf("converge reconcile of the suspended Sync %s/%s succeeded", syncNS, syncName)
	} else if ctx.Err() != nil {
		return ctx.Err()
	}
	note("refused, as it should be: the Sync is suspended")
	if err := d.show(ctx, "get", "syncs", "-n", syncNS); err != nil {
		return err
	}
	s, err := d.getSync(ctx)
	if err != nil {
		return err
	}
	if s.Status.LastAttemptedRevision == "main@sha1:"+sha {
		return fmt.Errorf("Sync %s/%s: the suspended Sync attempted %s", syncNS, syncName, s.Status.LastAttemptedRevision)
	}
	v, err := d.kubeVirtField(ctx, migrationsPath...)
	if err != nil {
		return err
	}
	note("not applied: KubeVirt parallelMigrationsPerCluster is still %s; the Sync is at %s, Git at %s", v, s.Status.LastAppliedRevision, sha[:7])
	took, err := d.converge(ctx, "resume", "sync", syncName, "-n", syncNS)
	if err != nil {
		return err
	}
	d.record("converge resume → the commit applied", took)
	if v, err = d.kubeVirtField(ctx, migrationsPath...); err != nil {
		return err
	}
	if v != "6" {
		return fmt.Errorf("KubeVirt %s/%s: parallelMigrationsPerCluster %s after the resume, want 6", hcNamespace, kubeVirt, v)
	}
	note("applied on resume: KubeVirt parallelMigrationsPerCluster is now %s", v)
	return d.show(ctx, "get", "syncs", "-n", syncNS)
}
