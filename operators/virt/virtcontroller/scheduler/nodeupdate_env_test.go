package scheduler_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

// TestNodeUpdateReschedules: with the periodic retry out of the way (an
// hour), a VMI left Pending for lack of memory is bound as soon as its
// Node's status.allocatable grows — the Node watch (nodeChanges) passes
// an update that changes what a decision reads, against a real API
// server's watch events.
func TestNodeUpdateReschedules(t *testing.T) {
	opts := scheduler.DefaultOptions()
	opts.SkipNameValidation = true
	opts.UnschedulableRetry = time.Hour
	e := virttest.New(t, func(mgr ctrl.Manager) error { return scheduler.SetupWithManager(mgr, opts) })
	ctx := context.Background()
	e.AddNode(t, virttest.Node("n1", "4", "1Gi", nil))
	v := virttest.VMISpec("2Gi", nil)
	v.Name = "big"
	if err := e.C.Create(ctx, v); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		for _, c := range e.VMI(t, "big").Status.Conditions {
			if c.Type == "PodScheduled" && c.Reason == "Unschedulable" {
				return true
			}
		}
		return false
	})
	n := &corev1.Node{}
	if err := e.C.Get(ctx, types.NamespacedName{Name: "n1"}, n); err != nil {
		t.Fatal(err)
	}
	n.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse("8Gi")
	if err := e.C.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	controlplane.Eventually(t, 20*time.Second, func() bool { return e.VMI(t, "big").Status.NodeName == "n1" })
	t.Logf("bound %v after the Node's allocatable memory grew", time.Since(start))
}
