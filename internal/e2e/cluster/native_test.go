package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/e2e/cluster"
)

// operandGroups are the API groups of the operand CRs (every inventory
// entry of these groups but the HyperConverged is one).
var operandGroups = []string{"kubevirt.io", "cdi.kubevirt.io", "networkaddonsoperator.network.kubevirt.io",
	"hostpathprovisioner.kubevirt.io", "ssp.kubevirt.io", "aaq.kubevirt.io", "migrations.kubevirt.io", "filerestore.kubevirt.io"}

// waitSyncReady waits up to 5 minutes for the example's Sync to be Ready
// at its generation and at the revision it last attempted, then checks what that means on a
// real cluster: every operand CR in its inventory is Available and not
// Degraded at its current generation, the HyperConverged is Available,
// and every DaemonSet and Deployment (the roles the operators run, and
// converge-controller) has all its pods ready.
func waitSyncReady(t *testing.T, ctx context.Context, e *cluster.Env) {
	t.Helper()
	eventually(t, 5*time.Minute, "the Sync is Ready", func() (bool, string) {
		s, err := getSync(ctx, e)
		if err != nil {
			return false, err.Error()
		}
		ready := apimeta.FindStatusCondition(s.Status.Conditions, "Ready")
		// Ready at the Sync's current generation: a spec change (the
		// operators mode, wait) is not Ready until reconciled.
		if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != s.Generation || s.Status.LastAppliedRevision != s.Status.LastAttemptedRevision {
			return false, fmt.Sprintf("Ready %+v, applied %q, attempted %q, components %+v", ready, s.Status.LastAppliedRevision, s.Status.LastAttemptedRevision, s.Status.Components)
		}
		return true, ""
	})
	s, err := getSync(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, en := range s.Status.Inventory.Entries {
		parts := strings.Split(en.ID, "_") // <namespace>_<name>_<group>_<kind>
		if len(parts) != 4 || parts[3] == "HyperConverged" || !slices.Contains(operandGroups, parts[2]) {
			continue
		}
		n++
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(en.Version)
		u.SetKind(parts[3])
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: parts[0], Name: parts[1]}, u); err != nil {
			t.Errorf("%s %s: %v", parts[3], parts[1], err)
			continue
		}
		if msg := availability(u); msg != "" {
			t.Errorf("%s %s/%s: %s", u.GetKind(), u.GetNamespace(), u.GetName(), msg)
		}
	}
	if t.Failed() {
		t.Logf("the operator's side:\n%s", controllerState(e))
	}
	if n == 0 {
		t.Error("the Sync's inventory holds no operand CR")
	}
	hc := &unstructured.Unstructured{}
	hc.SetAPIVersion("hco.kubevirt.io/v1")
	hc.SetKind("HyperConverged")
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: hcName}, hc); err != nil {
		t.Fatal(err)
	}
	if msg := availability(hc); msg != "" {
		t.Errorf("HyperConverged: %s", msg)
	}
	var dss appsv1.DaemonSetList
	if err := e.Client.List(ctx, &dss); err != nil {
		t.Fatal(err)
	}
	for _, d := range dss.Items {
		if d.Status.DesiredNumberScheduled == 0 || d.Status.NumberReady != d.Status.DesiredNumberScheduled {
			t.Errorf("DaemonSet %s/%s: %d of %d pods ready", d.Namespace, d.Name, d.Status.NumberReady, d.Status.DesiredNumberScheduled)
		}
	}
	var deps appsv1.DeploymentList
	if err := e.Client.List(ctx, &deps); err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		if d.Spec.Replicas != nil && d.Status.ReadyReplicas != *d.Spec.Replicas {
			t.Errorf("Deployment %s/%s: %d of %d replicas ready", d.Namespace, d.Name, d.Status.ReadyReplicas, *d.Spec.Replicas)
		}
	}
}

// availability gives "" when u's conditions say Available=True and
// Degraded not True at its generation (status.observedGeneration, when
// set), else what is wrong.
func availability(u *unstructured.Unstructured) string {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	conds := map[string]map[string]any{}
	for _, c := range raw {
		if m, ok := c.(map[string]any); ok {
			if ty, _ := m["type"].(string); ty != "" {
				conds[ty] = m
			}
		}
	}
	var bad []string
	if a := conds["Available"]; a == nil || a["status"] != "True" {
		bad = append(bad, fmt.Sprintf("Available %v", a))
	}
	if d := conds["Degraded"]; d != nil && d["status"] == "True" {
		bad = append(bad, fmt.Sprintf("Degraded %v", d))
	}
	if og, ok, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); ok && og != u.GetGeneration() {
		bad = append(bad, fmt.Sprintf("observedGeneration %d, generation %d", og, u.GetGeneration()))
	}
	return strings.Join(bad, "; ")
}
