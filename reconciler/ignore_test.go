package reconciler_test

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const hcAPI = "hco.kubevirt.io/v1"

// TestIgnoreRule exercises the graph's real ignore rule (HyperConverged
// /metadata/annotations/deployOVS, which HCO writes during upgrades):
// converge sets the annotation on create, keeps it while it is the only
// owner (a later apply does not delete it), and once another manager
// (here "hco-operator") changes it, keeps that value through syncs,
// config changes included, without reporting drift.
func TestIgnoreRule(t *testing.T) {
	c, _, mk := newClient(t)
	p := mk(testOptions(false))
	withAnn := func(extra ...string) *graphRendered {
		reps := append([]string{"  namespace: kubevirt-hyperconverged\n", "  namespace: kubevirt-hyperconverged\n  annotations:\n    deployOVS: \"false\"\n"}, extra...)
		return renderExample(t, map[string][]string{"hyperconverged.yaml": reps}, nil)
	}
	deployOVS := func() string {
		t.Helper()
		return obj(t, c, hcAPI, "HyperConverged", hcNS, hcNS).GetAnnotations()["deployOVS"]
	}
	doSync(t, p, withAnn())
	if v := deployOVS(); v != "false" {
		t.Fatalf("after create deployOVS = %q, want the config's \"false\"", v)
	}
	// A config change re-applies the HC: converge, sole owner, keeps it.
	doSync(t, p, withAnn("progressTimeout: 150", "progressTimeout: 160"))
	if v := deployOVS(); v != "false" {
		t.Fatalf("after a re-apply deployOVS = %q, want \"false\" kept", v)
	}

	hc := obj(t, c, hcAPI, "HyperConverged", hcNS, hcNS)
	ann := hc.GetAnnotations()
	ann["deployOVS"] = "true"
	hc.SetAnnotations(ann)
	if err := c.Update(context.Background(), hc, client.FieldOwner("hco-operator")); err != nil {
		t.Fatal(err)
	}
	res := doSync(t, p, withAnn("progressTimeout: 150", "progressTimeout: 160"))
	if v := deployOVS(); v != "true" {
		t.Errorf("after the other manager's write deployOVS = %q, want its \"true\" kept", v)
	}
	if len(res.Drifted) != 0 {
		t.Errorf("Drifted = %v, want nothing: an ignored path is not drift", res.Drifted)
	}
	if a := actions(res.ChangeSet)["HyperConverged/"+hcNS+"/"+hcNS]; a != ssa.UnchangedAction {
		t.Errorf("HyperConverged = %q, want unchanged", a)
	}
	// A later config change applies, and still leaves the annotation alone.
	doSync(t, p, withAnn("progressTimeout: 150", "progressTimeout: 170"))
	hc = obj(t, c, hcAPI, "HyperConverged", hcNS, hcNS)
	if v := hc.GetAnnotations()["deployOVS"]; v != "true" {
		t.Errorf("after a config change deployOVS = %q, want \"true\" kept", v)
	}
	if v, _, _ := nestedInt(hc.Object, "spec", "virtualization", "liveMigrationConfig", "progressTimeout"); v != 170 {
		t.Errorf("progressTimeout = %d, want the config change applied (170)", v)
	}
}
