package scheduler

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// nodeChanges passes the Node events that can change a decision: a Node
// added or deleted, and an update of what Schedule reads of a Node (its
// labels, spec.unschedulable, spec.taints, status.allocatable and
// v1alpha1.AllocatableAnnotation: schedulingChanged). A status update
// that changes none of them (a heartbeat, a condition's time) passes
// not: on 50 simulated nodes those re-queued every pending VMI several
// times a second, each time listing every VMI.
var nodeChanges = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		return !ok1 || !ok2 || schedulingChanged(old, n)
	},
}

// schedulingChanged reports whether n differs from old in what Schedule
// reads of a Node (reject, score, allocatable).
func schedulingChanged(old, n *corev1.Node) bool {
	return !maps.Equal(old.Labels, n.Labels) ||
		old.Spec.Unschedulable != n.Spec.Unschedulable ||
		!slices.EqualFunc(old.Spec.Taints, n.Spec.Taints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) ||
		!equalResources(old.Status.Allocatable, n.Status.Allocatable) ||
		old.Annotations[v1alpha1.AllocatableAnnotation] != n.Annotations[v1alpha1.AllocatableAnnotation]
}

// equalResources reports whether a and b hold the same quantities.
func equalResources(a, b corev1.ResourceList) bool {
	return maps.EqualFunc(a, b, func(x, y resource.Quantity) bool { return x.Cmp(y) == 0 })
}
