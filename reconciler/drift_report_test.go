package reconciler_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestDriftReport edits live objects with another field manager. A field
// converge owns is reported as drift and reverted; a label and a spec
// field the rendered object does not set are left alone (SSA field
// ownership: HCO, which copies its whole desired spec with Update, would
// wipe the spec field) and are not drift. Converge's own writes (HC
// status, versions after the kstatus wait) never count.
func TestDriftReport(t *testing.T) {
	c, _, mk := newClient(t)
	p := mk(testOptions(false))
	r := renderExample(t, nil, nil)
	res := doSync(t, p, r)
	if len(res.Drifted) != 0 {
		t.Errorf("first sync Drifted = %v", res.Drifted)
	}
	res = doSync(t, p, r)
	if len(res.Drifted) != 0 || res.Writes != 0 {
		t.Errorf("no-op resync: Drifted = %v, %d writes; want none (converge's own status write is not drift)", res.Drifted, res.Writes)
	}

	ctx := context.Background()
	kv := obj(t, c, kvAPI, "KubeVirt", hcNS, kvName)
	_ = unstructured.SetNestedField(kv.Object, "RemoveWorkloads", "spec", "uninstallStrategy") // converge's
	_ = unstructured.SetNestedField(kv.Object, "v9.9.9", "spec", "imageTag")                   // not rendered
	labels := kv.GetLabels()
	labels["team"] = "virt"
	kv.SetLabels(labels)
	if err := c.Update(ctx, kv, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	cdi := obj(t, c, cdiAPI, "CDI", "", cdiName)
	labels = cdi.GetLabels()
	labels["team"] = "storage"
	cdi.SetLabels(labels)
	if err := c.Update(ctx, cdi, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}

	res = doSync(t, p, r)
	if want := []string{idOf(kv)}; !reflect.DeepEqual(res.Drifted, want) {
		t.Errorf("Drifted = %v, want %v (the KubeVirt CR only)", res.Drifted, want)
	}
	a := actions(res.ChangeSet)
	if a["KubeVirt/"+hcNS+"/"+kvName] != ssa.ConfiguredAction || a["CDI/"+cdiName] != ssa.UnchangedAction {
		t.Errorf("KubeVirt = %q, CDI = %q; want configured (reverted) and unchanged", a["KubeVirt/"+hcNS+"/"+kvName], a["CDI/"+cdiName])
	}
	kv = obj(t, c, kvAPI, "KubeVirt", hcNS, kvName)
	if v, _, _ := unstructured.NestedString(kv.Object, "spec", "uninstallStrategy"); v != "BlockUninstallIfWorkloadsExist" {
		t.Errorf("KubeVirt spec.uninstallStrategy = %q, want the config's value back", v)
	}
	if v, _, _ := unstructured.NestedString(kv.Object, "spec", "imageTag"); v != "v9.9.9" {
		t.Errorf("KubeVirt spec.imageTag = %q, want the other manager's v9.9.9 kept", v)
	}
	if kv.GetLabels()["team"] != "virt" || obj(t, c, cdiAPI, "CDI", "", cdiName).GetLabels()["team"] != "storage" {
		t.Error("another manager's label was removed")
	}
	res = doSync(t, p, r)
	if len(res.Drifted) != 0 {
		t.Errorf("sync after the revert: Drifted = %v", res.Drifted)
	}
}
