package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/reconciler"
)

// denyInventoryOf installs a ValidatingAdmissionPolicy refusing writes of
// `converge apply`'s inventory ConfigMap that record revision rev — the
// end of a sync whose process dies (or whose API server goes away) after
// it applied and pruned but before it saved its inventory — and waits
// until the API server enforces it. It returns a func removing it.
func denyInventoryOf(t *testing.T, c client.Client, rev string) func() {
	t.Helper()
	ctx := context.Background()
	name := "deny-inventory-" + rev
	fail := admissionv1.Fail
	pol := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				ResourceNames: []string{reconciler.InventoryName(hcNS)},
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"configmaps"}}},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: `!object.data['inventory.json'].contains('"revision":"` + rev + `"')`,
				Message:    "inventory write refused by the test"}},
		}}
	bind := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	for _, o := range []client.Object{pol, bind} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	probe := func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: hcNS, Name: reconciler.InventoryName(hcNS)},
			Data: map[string]string{"inventory.json": `{"revision":"` + rev + `"}`}}
		return c.Update(ctx, cm, client.DryRunAll)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		err := probe()
		return err != nil && strings.Contains(err.Error(), "refused by the test")
	})
	return func() {
		if err := c.Delete(ctx, bind); err != nil {
			t.Fatal(err)
		}
		controlplane.Eventually(t, 30*time.Second, func() bool {
			err := probe()
			return err == nil || !strings.Contains(err.Error(), "refused by the test")
		})
	}
}

// TestWriteAhead: a sync that applies and prunes but cannot save its
// inventory at the end (the API server refuses that one write) has
// recorded the objects it created beforehand, under the previous
// revision, so the next sync of a config without them prunes them; the
// record is written only when a sync creates something.
func TestWriteAhead(t *testing.T) {
	c, _, mk := newClient(t)
	p := mk(testOptions(false))
	ctx := context.Background()
	data := map[string]string{"k": "v"}
	sync := func(rev string, names ...string) (*reconciler.Result, error) {
		t.Helper()
		var objs []*unstructured.Unstructured
		for _, n := range names {
			objs = append(objs, configMap(n, data))
		}
		return p.Sync(ctx, reconciler.Input{Rendered: withObjects(renderExample(t, nil, nil), objs...), Revision: rev})
	}
	exists := func(name string) bool { return obj(t, c, "v1", "ConfigMap", hcNS, name) != nil }
	stored := func() reconciler.StoredInventory {
		t.Helper()
		st, err := reconciler.ConfigMapStore{Client: c, Reader: c, Namespace: hcNS, Name: hcNS}.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	id := func(name string) string { return hcNS + "_" + name + "__ConfigMap" }

	if _, err := sync("a", "from-a"); err != nil {
		t.Fatal(err)
	}
	res, err := sync("a", "from-a")
	if err != nil || res.Writes != 0 {
		t.Fatalf("resync of the same config: %d writes (%v), want none (nothing new to record)", res.Writes, err)
	}

	allow := denyInventoryOf(t, c, "b")
	_, err = sync("b", "from-b")
	if err == nil || !strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("sync of b: %v, want the inventory write refused", err)
	}
	if !exists("from-b") || exists("from-a") {
		t.Fatalf("after the interrupted sync of b: from-b exists %v (want true), from-a exists %v (want false: pruned)", exists("from-b"), exists("from-a"))
	}
	st := stored()
	if st.Revision != "a" || !inIndex(st, id("from-b")) {
		t.Errorf("inventory after the interrupted sync: revision %q, from-b recorded %v; want revision a and from-b recorded ahead", st.Revision, inIndex(st, id("from-b")))
	}
	allow()

	if _, err := sync("c", "from-c"); err != nil {
		t.Fatal(err)
	}
	if exists("from-b") {
		t.Error("from-b, created by the interrupted sync, was left behind by the next sync of a config without it")
	}
	if st := stored(); st.Revision != "c" || inIndex(st, id("from-b")) || inIndex(st, id("from-a")) || !inIndex(st, id("from-c")) {
		t.Errorf("inventory after the sync of c: revision %q, entries %v; want revision c with from-c and neither from-a nor from-b", st.Revision, st.Inventory.Entries)
	}
}

func inIndex(st reconciler.StoredInventory, id string) bool {
	if st.Inventory == nil {
		return false
	}
	for _, e := range st.Inventory.Entries {
		if e.ID == id {
			return true
		}
	}
	return false
}

// TestWriteAheadAfterItsNamespace: the first sync of `converge apply`
// into a namespace it creates does not try to write its inventory
// ConfigMap before that namespace exists (the API server holds such a
// write ~50 ms before refusing it NotFound), and still records the objects
// to create before the first of the next batch is applied.
func TestWriteAheadAfterItsNamespace(t *testing.T) {
	c, err := client.NewWithWatch(startEnv(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []string // "inventory <error>" and "object <name>", in order
	wrapped := interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			err := cl.Patch(ctx, obj, patch, opts...)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case obj.GetName() == reconciler.InventoryName(hcNS):
				calls = append(calls, fmt.Sprintf("inventory %v", err))
			case obj.GetName() == "ahead-cm":
				calls = append(calls, "object "+obj.GetName())
			}
			return err
		},
	})
	p := reconciler.NewPipeline(wrapped, nil, testOptions(false))
	doSync(t, p, withObjects(renderExample(t, nil, nil), configMap("ahead-cm", map[string]string{"k": "v"})))
	if len(calls) < 3 || calls[0] != "inventory <nil>" || calls[1] != "object ahead-cm" {
		t.Fatalf("inventory and object writes %q, want a successful inventory write first, then ahead-cm, then the final inventory", calls)
	}
	for _, c := range calls {
		if strings.HasPrefix(c, "inventory ") && c != "inventory <nil>" {
			t.Errorf("inventory write failed: %s", c)
		}
	}
}
