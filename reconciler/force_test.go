package reconciler_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/reconciler"
)

// TestForceRecreate pre-creates, with converge's owner labels, objects
// whose immutable fields differ from the config: the PriorityClass (its
// value; the graph opts it in with converge.dev/force: enabled, as HCO
// recreates it) is deleted and recreated; an immutable ConfigMap without
// the annotation fails the sync naming it and the annotation, and is
// recreated once a user annotates the live object.
func TestForceRecreate(t *testing.T) {
	c, _, mk := newClient(t)
	p := mk(testOptions(false))
	ctx := context.Background()
	owner := p.OwnerLabels(hcNS, hcNS)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hcNS}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-cluster-critical", Labels: owner}, Value: 1}); err != nil {
		t.Fatal(err)
	}
	yes := true
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "frozen", Namespace: hcNS, Labels: owner},
		Immutable: &yes, Data: map[string]string{"k": "old"}}); err != nil {
		t.Fatal(err)
	}
	frozen := configMap("frozen", map[string]string{"k": "new"})
	frozen.Object["immutable"] = true
	r := withObjects(renderExample(t, nil, nil), frozen)

	_, err := trySync(t, p, r)
	if err == nil {
		t.Fatal("sync with an immutable ConfigMap change and no force annotation succeeded")
	}
	for _, want := range []string{"ConfigMap/" + hcNS + "/frozen", "immutable", reconciler.ForceAnnotation + ": " + reconciler.Enabled} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}

	// The user annotates the live object (kubectl annotate).
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: hcNS, Name: "frozen"}, cm); err != nil {
		t.Fatal(err)
	}
	oldUID := cm.UID
	cm.Annotations = map[string]string{reconciler.ForceAnnotation: reconciler.Enabled}
	if err := c.Update(ctx, cm, client.FieldOwner("kubectl-annotate")); err != nil {
		t.Fatal(err)
	}
	res := doSync(t, p, r)
	want := []string{"_kubevirt-cluster-critical_scheduling.k8s.io_PriorityClass", hcNS + "_frozen__ConfigMap"}
	if !reflect.DeepEqual(res.Recreated, want) {
		t.Errorf("Recreated = %v, want %v", res.Recreated, want)
	}
	pc := &schedulingv1.PriorityClass{}
	if err := c.Get(ctx, client.ObjectKey{Name: "kubevirt-cluster-critical"}, pc); err != nil || pc.Value != 1000000000 {
		t.Errorf("PriorityClass value = %d (%v), want 1000000000 after the recreate", pc.Value, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: hcNS, Name: "frozen"}, cm); err != nil || cm.Data["k"] != "new" || cm.UID == oldUID {
		t.Errorf("ConfigMap data = %v, uid changed = %v (%v); want the new data in a new object", cm.Data, cm.UID != oldUID, err)
	}
	if res = doSync(t, p, r); len(res.Recreated) != 0 || res.Writes != 0 {
		t.Errorf("resync after recreate: Recreated = %v, %d writes; want none", res.Recreated, res.Writes)
	}
}
