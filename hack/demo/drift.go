package main

import (
	"context"
	"fmt"
	"time"
)

// drift changes a field converge owns on the KubeVirt CR with `kubectl
// patch` (a JSON merge patch) and measures how long converge-controller
// takes to put it back (at most a minute).
func (d *demo) drift(ctx context.Context) error {
	say("drift: someone changes a field converge owns on the KubeVirt CR")
	const field, want = "spec.uninstallStrategy", "BlockUninstallIfWorkloadsExist"
	start := time.Now()
	if _, err := d.kubectl(ctx, "-n", hcNamespace, "patch", "kubevirt", kubeVirt, "--type=merge", "-p", `{"spec":{"uninstallStrategy":"RemoveWorkloads"}}`); err != nil {
		return err
	}
	deadline := start.Add(time.Minute)
	for {
		v, err := d.kubeVirtField(ctx, "spec", "uninstallStrategy")
		if err != nil {
			return err
		}
		if v == want {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("KubeVirt %s/%s: %s still %q a minute after the change: drift not reverted", hcNamespace, kubeVirt, field, v)
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	took := time.Since(start)
	d.record("drift reverted", took)
	note("%s is back to %s %s after the change: converge-controller watches what it applied (spec.interval is 5m)",
		field, want, took.Round(time.Millisecond))
	return nil
}
