package reconciler_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/reconciler"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// TestRefresh: after a Sync applied every component, Refresh reports the
// operators' status changes — the components' health and the
// HyperConverged's status — without writing anything else; where a health
// gate would now defer a component it writes nothing and says Waiting.
func TestRefresh(t *testing.T) {
	c, p, _ := newClient(t)
	ctx := context.Background()
	r := renderExample(t, map[string][]string{"hyperconverged.yaml": external}, openshift)
	store := reconciler.ConfigMapStore{Client: c, Reader: c, Namespace: hcNS, Name: "kubevirt-hyperconverged"}
	refresh := func() *reconciler.Result {
		t.Helper()
		res, err := p.Refresh(ctx, reconciler.Input{Rendered: r, Revision: "test", Inventory: store})
		if err != nil {
			t.Fatalf("refresh: %v", err)
		}
		return res
	}
	// Every applied object's resourceVersion, by inventory ID.
	versions := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, o := range r.Objects() {
			if u := obj(t, c, o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName()); u != nil {
				out[inventory.ID(o)] = u.GetResourceVersion()
			}
		}
		return out
	}
	hcID := hcNS + "_kubevirt-hyperconverged_hco.kubevirt.io_HyperConverged"
	hcDegraded := func() string {
		t.Helper()
		hc := obj(t, c, "hco.kubevirt.io/v1", "HyperConverged", hcNS, "kubevirt-hyperconverged")
		cs, _, _ := unstructured.NestedSlice(hc.Object, "status", "conditions")
		for _, x := range cs {
			if m := x.(map[string]any); m["type"] == "Degraded" {
				return m["status"].(string) + " " + m["reason"].(string) + ": " + m["message"].(string)
			}
		}
		return ""
	}

	doSync(t, p, r)
	setConditions(t, c, cdiAPI, "CDI", "", cdiName, metav1.ConditionTrue, metav1.ConditionFalse, "")
	setConditions(t, c, kvAPI, "KubeVirt", hcNS, kvName, metav1.ConditionTrue, metav1.ConditionFalse, "")
	for i := 0; i < 3 && doSync(t, p, r).Waiting; i++ {
	}
	if res := doSync(t, p, r); res.Waiting {
		t.Fatalf("still Waiting after CDI and KubeVirt turned Available: %+v", res.Components)
	}

	// 1. Nothing changed: nothing written.
	before := versions()
	res := refresh()
	if res.Waiting || res.Writes != 0 || len(res.ChangeSet.Entries) != 0 {
		t.Errorf("refresh of an unchanged cluster: Waiting %v, %d writes, change set %v; want none", res.Waiting, res.Writes, res.ChangeSet.Entries)
	}
	if after := versions(); !equal(before, after) {
		t.Errorf("an unchanged refresh changed objects:\nbefore %v\nafter  %v", before, after)
	}

	// 2. The SSP's operator reports it Degraded (nothing depends on ssp):
	// ssp Failed, the HC Degraded with its message, the HC's new
	// resourceVersion in the inventory, nothing else written.
	setConditions(t, c, sspAPI, "SSP", hcNS, sspName, metav1.ConditionFalse, metav1.ConditionTrue, "template validator crashlooping")
	before = versions()
	res = refresh()
	if h := health(res)["ssp"]; res.Waiting || h.Health != reconciler.Failed || !strings.Contains(h.Message, "template validator crashlooping") {
		t.Errorf("after the SSP degraded: Waiting %v, ssp %+v; want ssp Failed with its message", res.Waiting, h)
	}
	if d := hcDegraded(); !strings.HasPrefix(d, "True SSPDegraded") || !strings.Contains(d, "template validator crashlooping") {
		t.Errorf("HyperConverged Degraded %q, want True SSPDegraded with the SSP's message", d)
	}
	if res.Writes != 1 {
		t.Errorf("%d writes, want 1 (the HC status)", res.Writes)
	}
	after := versions()
	for id, v := range before {
		if id != hcID && after[id] != v {
			t.Errorf("refresh wrote %s (resourceVersion %s -> %s)", id, v, after[id])
		}
	}
	saved, err := store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := inventory.Index(saved.Inventory)[hcID].ResourceVersion; got != after[hcID] {
		t.Errorf("inventory records the HC at resourceVersion %s, live %s", got, after[hcID])
	}

	// 3. The KubeVirt degrades: ssp depends on virt, so a Sync would
	// defer it. Refresh says Waiting and writes nothing.
	setConditions(t, c, kvAPI, "KubeVirt", hcNS, kvName, metav1.ConditionFalse, metav1.ConditionTrue, "virt-handler down")
	before = versions()
	if res = refresh(); !res.Waiting || health(res)["ssp"].Health != reconciler.Waiting {
		t.Errorf("after the KubeVirt degraded: Waiting %v, ssp %+v; want Waiting", res.Waiting, health(res)["ssp"])
	}
	if after := versions(); !equal(before, after) || strings.Contains(hcDegraded(), "virt-handler down") {
		t.Errorf("a Waiting refresh wrote: HC Degraded %q", hcDegraded())
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
