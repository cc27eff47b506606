package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// TestSchedulingChanged: a Node update re-queues the pending VMIs only
// when it changes what a decision reads; a heartbeat does not.
func TestSchedulingChanged(t *testing.T) {
	base := func() *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1alpha1.AgentLabel: "true"},
				Annotations: map[string]string{"other": "x"}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Unix(1, 0)}},
			},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(n *corev1.Node)
		want   bool
	}{
		{"nothing", func(*corev1.Node) {}, false},
		{"a heartbeat", func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.Unix(2, 0) }, false},
		{"another annotation", func(n *corev1.Node) { n.Annotations["other"] = "y" }, false},
		{"the same quantity written otherwise", func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("4000m") }, false},
		{"a label", func(n *corev1.Node) { n.Labels["kubevirt.io/schedulable"] = "false" }, true},
		{"cordoned", func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
		{"a taint's value", func(n *corev1.Node) { n.Spec.Taints[0].Value = "w" }, true},
		{"a taint's effect", func(n *corev1.Node) { n.Spec.Taints[0].Effect = corev1.TaintEffectPreferNoSchedule }, true},
		{"a taint removed", func(n *corev1.Node) { n.Spec.Taints = nil }, true},
		{"allocatable memory", func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse("16Gi") }, true},
		{"a resource added", func(n *corev1.Node) {
			n.Status.Allocatable[v1alpha1.BridgeResourcePrefix+"br1"] = resource.MustParse("1k")
		}, true},
		{"the allocatable annotation", func(n *corev1.Node) { n.Annotations[v1alpha1.AllocatableAnnotation] = `{"cpu":"2"}` }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, n := base(), base()
			tc.change(n)
			if got := schedulingChanged(old, n); got != tc.want {
				t.Errorf("schedulingChanged = %v, want %v", got, tc.want)
			}
			if got := nodeChanges.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: n}); got != tc.want {
				t.Errorf("nodeChanges.Update = %v, want %v", got, tc.want)
			}
		})
	}
	if !nodeChanges.Create(event.CreateEvent{Object: base()}) || !nodeChanges.Delete(event.DeleteEvent{Object: base()}) {
		t.Error("a Node added or deleted must re-queue the pending VMIs")
	}
}
