package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/reconciler"
)

// denyDelete installs a ValidatingAdmissionPolicy and binding in the real
// API server refusing DELETE of the named objects of resource (group ""
// unless given as "group/resource") and waits until the API server
// enforces it (a dry-run delete is refused). It returns a func removing
// the binding.
func denyDelete(t *testing.T, c client.Client, resource string, obj client.Object) func() {
	t.Helper()
	ctx := context.Background()
	group, res := "", resource
	if i := strings.Index(resource, "/"); i >= 0 {
		group, res = resource[:i], resource[i+1:]
	}
	name := "deny-delete-" + obj.GetName()
	fail := admissionv1.Fail
	pol := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				ResourceNames: []string{obj.GetName()},
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Delete},
					Rule: admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{res}}},
			}}},
			Validations: []admissionv1.Validation{{Expression: "false", Message: "protected by the test"}},
		}}
	bind := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	for _, o := range []client.Object{pol, bind} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		err := c.Delete(ctx, obj, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "protected by the test")
	})
	return func() {
		if err := c.Delete(ctx, bind); err != nil {
			t.Fatal(err)
		}
		controlplane.Eventually(t, 30*time.Second, func() bool { return c.Delete(ctx, obj, client.DryRunAll) == nil })
	}
}

// TestSafePrune proves the prune rules on ConfigMaps added to the
// example's hco component: (a) an object that left the config is
// deleted; (b) an object with converge's owner labels that is not in the
// inventory is never deleted; (c) an inventory object whose owner labels
// someone removed is kept and dropped from the inventory; (d)
// converge.dev/prune: disabled keeps it (dropped from the inventory);
// (e) an object whose delete fails (a ValidatingAdmissionPolicy denies
// it) stays in the inventory, the error names it, and a later sync
// deletes it once allowed.
func TestSafePrune(t *testing.T) {
	c, _, mk := newClient(t)
	p := mk(testOptions(false))
	ctx := context.Background()
	base := func() *graphRendered { return renderExample(t, nil, nil) }
	data := map[string]string{"k": "v"}
	doSync(t, p, withObjects(base(), configMap("a-left", data), configMap("c-unlabelled", data),
		configMap("d-keep", data), configMap("e-undeletable", data)))

	owner := p.OwnerLabels(hcNS, hcNS)
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b-foreign", Namespace: hcNS, Labels: owner}}); err != nil {
		t.Fatal(err)
	}
	get := func(name string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: hcNS, Name: name}, cm); err != nil {
			return nil
		}
		return cm
	}
	cm := get("c-unlabelled")
	delete(cm.Labels, reconciler.OwnerGroup+"/name")
	if err := c.Update(ctx, cm, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	cm = get("d-keep")
	cm.Annotations = map[string]string{reconciler.PruneAnnotation: reconciler.Disabled}
	if err := c.Update(ctx, cm, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	allow := denyDelete(t, c, "configmaps", get("e-undeletable"))

	res, err := trySync(t, p, base())
	if err == nil || !strings.HasPrefix(err.Error(), "ConfigMap/"+hcNS+"/e-undeletable delete failed") || !strings.Contains(err.Error(), "protected by the test") {
		t.Errorf("sync error = %v, want one naming ConfigMap/%s/e-undeletable first", err, hcNS)
	}
	if se := (*reconciler.StageError)(nil); !errors.As(err, &se) || se.Phase != reconciler.PhasePrune {
		t.Errorf("sync error %v (%T): want a *reconciler.StageError of phase Prune", err, err)
	}
	a := actions(res.ChangeSet)
	for _, tc := range []struct {
		name        string
		exists      bool
		inInventory bool
		action      ssa.Action
	}{
		{"a-left", false, false, ssa.DeletedAction},
		{"b-foreign", true, false, ""},
		{"c-unlabelled", true, false, ssa.SkippedAction},
		{"d-keep", true, false, ssa.SkippedAction},
		{"e-undeletable", true, true, ssa.UnknownAction},
	} {
		if got := get(tc.name) != nil; got != tc.exists {
			t.Errorf("%s exists = %v, want %v", tc.name, got, tc.exists)
		}
		if got := inInventory(res, hcNS+"_"+tc.name+"__ConfigMap"); got != tc.inInventory {
			t.Errorf("%s in inventory = %v, want %v", tc.name, got, tc.inInventory)
		}
		if got := a["ConfigMap/"+hcNS+"/"+tc.name]; got != tc.action {
			t.Errorf("%s action = %q, want %q", tc.name, got, tc.action)
		}
	}

	allow()
	res = doSync(t, p, base())
	if get("e-undeletable") != nil || inInventory(res, hcNS+"_e-undeletable__ConfigMap") {
		t.Error("e-undeletable not pruned once its delete was allowed")
	}
	if get("b-foreign") == nil || get("c-unlabelled") == nil || get("d-keep") == nil {
		t.Error("a later sync deleted an object that is not converge's to prune")
	}
}
