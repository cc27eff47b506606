package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// drift changes a field converge owns on the KubeVirt CR, as `kubectl
// patch` would (a JSON merge patch, field manager kubectl-patch), and
// measures how long converge-controller takes to put it back (at most a
// minute).
func (d *demo) drift(ctx context.Context) error {
	say("drift: someone changes a field converge owns on the KubeVirt CR")
	const field, want = "spec.uninstallStrategy", "BlockUninstallIfWorkloadsExist"
	patch := `{"spec":{"uninstallStrategy":"RemoveWorkloads"}}`
	fmt.Printf("\n$ kubectl -n %s patch kubevirt %s --type=merge -p '%s'\n", hcNamespace, kubeVirt, patch)
	start := time.Now()
	if err := d.env.Client.Patch(ctx, kubeVirtObject(), client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner("kubectl-patch")); err != nil {
		return fmt.Errorf("patching KubeVirt %s/%s: %w", hcNamespace, kubeVirt, err)
	}
	fmt.Printf("kubevirt.kubevirt.io/%s patched\n", kubeVirt)
	note("(sent by the demo with client-go as kubectl would: a JSON merge patch, field manager kubectl-patch)")
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
