package hppoperator_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/operators/hostpath/hppoperator"
)

// TestPoolNodes checks which nodes get storage pool workers: those
// spec.workload's nodeSelector and required node affinity select, taints
// notwithstanding, sorted by name.
func TestPoolNodes(t *testing.T) {
	node := func(name string, labels map[string]string, taints ...corev1.Taint) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	nodes := []corev1.Node{
		node("worker-b", map[string]string{"kubernetes.io/os": "linux", "disk": "nvme"}),
		node("worker-a", map[string]string{"kubernetes.io/os": "linux"}, corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoExecute}),
		node("windows", map[string]string{"kubernetes.io/os": "windows"}),
	}
	for _, tc := range []struct {
		name     string
		workload any
		want     []string
		wantErr  string
	}{
		{"no workload", nil, []string{"windows", "worker-a", "worker-b"}, ""},
		{"node selector", map[string]any{"nodeSelector": map[string]any{"kubernetes.io/os": "linux"}}, []string{"worker-a", "worker-b"}, ""},
		{"selector and affinity", map[string]any{
			"nodeSelector": map[string]any{"kubernetes.io/os": "linux"},
			"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
				"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "disk", "operator": "In", "values": []any{"nvme"}}}}}}}},
		}, []string{"worker-b"}, ""},
		{"nothing matches", map[string]any{"nodeSelector": map[string]any{"kubernetes.io/os": "plan9"}}, []string{}, ""},
		{"bad workload", "linux", nil, "spec.workload: expected an object"},
		{"bad affinity", map[string]any{"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "disk", "operator": "Gt", "values": []any{"x"}}}}}}}}},
			nil, "spec.workload.affinity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "hpp"}, "spec": map[string]any{}}}
			if tc.workload != nil {
				cr.Object["spec"].(map[string]any)["workload"] = tc.workload
			}
			got, err := hppoperator.PoolNodes(cr, nodes)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("PoolNodes = %v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("PoolNodes = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
