package reconciler_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/reconciler"
)

// TestStageErrors checks that Pipeline.Sync reports an apply failure and
// a health-check failure as a *reconciler.StageError with the phase and
// the stage (TestSafePrune covers PhasePrune): a ConfigMap the API
// server refuses fails PhaseApply, a Deployment that never rolls out (no
// controllers run) fails PhaseHealth when the kstatus wait times out.
func TestStageErrors(t *testing.T) {
	_, _, mk := newClient(t)
	// The graph's CRDs first, with room to spare: on a loaded machine its
	// 14 CRDs (the VM ones are large) take longer than the 2 s the cases
	// below allow to become established.
	if _, err := trySync(t, mk(testOptions(false)), renderExample(t, nil, nil)); err != nil {
		t.Fatalf("installing the example: %v", err)
	}
	opts := testOptions(false)
	opts.WaitTimeout = 2 * time.Second
	p := mk(opts)

	invalid := configMap("bad", map[string]string{"not a key": "x"})
	for _, tc := range []struct {
		name  string
		obj   *unstructured.Unstructured
		phase reconciler.Phase
		want  []string
	}{
		{"invalid object", invalid, reconciler.PhaseApply, []string{"stage hco: ", "ConfigMap/" + hcNS + "/bad: invalid"}},
		{"never ready", deploymentObj(t, "never-ready"), reconciler.PhaseHealth, []string{"stage hco: health check of Deployment/" + hcNS + "/never-ready: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := trySync(t, p, withObjects(renderExample(t, nil, nil), tc.obj))
			t.Logf("sync failed after %s", time.Since(start).Round(time.Millisecond))
			var se *reconciler.StageError
			if !errors.As(err, &se) {
				t.Fatalf("sync error %v (%T), want a *reconciler.StageError", err, err)
			}
			if se.Phase != tc.phase || se.Stage != "hco" {
				t.Errorf("StageError phase %s stage %q, want %s hco: %v", se.Phase, se.Stage, tc.phase, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// deploymentObj is a one-replica Deployment in hcNS, as unstructured.
func deploymentObj(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: hcNS, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
			},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u
}
