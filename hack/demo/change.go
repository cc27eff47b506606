package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// change commits a feature-gate flip to the config repository, has it
// applied now with `converge reconcile sync`, and shows it in the
// KubeVirt CR and the Sync, Ready at the new revision.
func (d *demo) change(ctx context.Context) error {
	say("a committed change: spec.featureGates.downwardMetrics: false → true")
	sha, err := d.repo.edit(hcFile, "downwardMetrics: false", "downwardMetrics: true", "enable the downwardMetrics feature gate")
	if err != nil {
		return err
	}
	note("committed %s", d.repo.head())
	start := time.Now()
	if err := d.show(ctx, "reconcile", "sync", syncName, "-n", syncNS); err != nil {
		return err
	}
	note("`converge reconcile sync` returned %s after the request (without it, the Sync's spec.interval, 5m, would)", since(start))
	revision := "main@sha1:" + sha
	if _, err := d.waitSync(ctx, "Ready at "+revision, 2*time.Minute, func(s *v1alpha1.Sync) bool {
		return synced(s) && s.Status.LastAppliedRevision == revision
	}); err != nil {
		return err
	}
	d.record("commit → Sync Ready at the new revision", time.Since(start))
	gates, err := d.kubeVirtField(ctx, "spec", "configuration", "developerConfiguration", "featureGates")
	if err != nil {
		return err
	}
	if !strings.Contains(gates, "DownwardMetrics") {
		return fmt.Errorf("KubeVirt %s/%s: featureGates %s lack DownwardMetrics after revision %s was applied", hcNamespace, kubeVirt, gates, revision)
	}
	note("KubeVirt %s spec.configuration.developerConfiguration.featureGates: %s", kubeVirt, gates)
	return d.show(ctx, "get", "syncs", "-n", syncNS)
}

// waitSync reads the Sync every 200ms until cond holds, for at most
// timeout; it gives the Sync. The error names what was awaited and the
// Sync's conditions.
func (d *demo) waitSync(ctx context.Context, what string, timeout time.Duration, cond func(*v1alpha1.Sync) bool) (*v1alpha1.Sync, error) {
	deadline := time.Now().Add(timeout)
	for {
		s, err := d.getSync(ctx)
		if err == nil && cond(s) {
			return s, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("Sync %s/%s: %s not reached within %s: %w", syncNS, syncName, what, timeout, err)
			}
			return nil, fmt.Errorf("Sync %s/%s: %s not reached within %s; conditions %+v, components %+v", syncNS, syncName, what, timeout, s.Status.Conditions, s.Status.Components)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
}
