package scheduler_test

import (
	"context"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

// TestStaleNodeLabel is the pure rule for fixing kubevirt.io/nodeName.
func TestStaleNodeLabel(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		node   string
		want   bool
	}{
		{"bound, labelled alike", map[string]string{scheduler.NodeNameLabel: "a"}, "a", false},
		{"bound, labelled for another node", map[string]string{scheduler.NodeNameLabel: "b"}, "a", true},
		{"bound, unlabelled (hand-bound or older)", nil, "a", false},
		{"pending, labelled", map[string]string{scheduler.NodeNameLabel: "a"}, "", true},
		{"pending, unlabelled", map[string]string{"x": "y"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &kubevirtv1.VirtualMachineInstance{}
			v.Labels, v.Status.NodeName = tt.labels, tt.node
			if got := scheduler.StaleNodeLabel(v); got != tt.want {
				t.Errorf("StaleNodeLabel(labels %v, nodeName %q) = %t, want %t", tt.labels, tt.node, got, tt.want)
			}
		})
	}
}

// TestSchedulerNodeLabel runs the scheduler through the API server: a VMI
// it binds carries kubevirt.io/nodeName = its node; an unschedulable VMI
// created with a label loses it; a VMI bound by hand with a wrong label
// gets it fixed; one bound by hand without a label keeps none.
func TestSchedulerNodeLabel(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.AddNode(t, virttest.Node("n1", "4", "16Gi", nil))
	nowhere := map[string]string{"zone": "none"}
	create := func(name string, sel map[string]string, label string) {
		t.Helper()
		v := virttest.VMISpec("1Gi", sel)
		v.Name = name
		if label != "" {
			v.Labels = map[string]string{scheduler.NodeNameLabel: label}
		}
		if err := e.C.Create(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	create("fresh", nil, "")
	create("ghost", nowhere, "ghost")
	create("mislabelled", nowhere, "")
	create("hand", nowhere, "")
	label := func(name string) (string, bool) {
		v := e.VMI(t, name)
		l, ok := v.Labels[scheduler.NodeNameLabel]
		return l, ok
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		v := e.VMI(t, "fresh")
		return v.Status.NodeName == "n1" && v.Labels[scheduler.NodeNameLabel] == "n1"
	})
	t.Logf("fresh VMI bound and labelled after %v", time.Since(start))
	controlplane.Eventually(t, 30*time.Second, func() bool {
		v := e.VMI(t, "ghost")
		_, ok := v.Labels[scheduler.NodeNameLabel]
		return !ok && v.Status.Phase == kubevirtv1.Pending && v.Status.NodeName == ""
	})
	// bind by hand, as the agent tests do (retry: the scheduler writes
	// Unschedulable concurrently)
	for _, name := range []string{"mislabelled", "hand"} {
		controlplane.Eventually(t, 30*time.Second, func() bool {
			v := e.VMI(t, name)
			v.Status.NodeName, v.Status.Phase = "n1", kubevirtv1.Scheduled
			return e.C.Status().Update(ctx, v) == nil
		})
	}
	v := e.VMI(t, "mislabelled")
	patch := client.MergeFrom(v.DeepCopy())
	v.Labels = map[string]string{scheduler.NodeNameLabel: "ghost"}
	if err := e.C.Patch(ctx, v, patch); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		l, _ := label("mislabelled")
		return l == "n1"
	})
	if l, ok := label("hand"); ok {
		t.Errorf("hand-bound VMI got label %s=%s; want none (the agent watches unlabelled VMIs)", scheduler.NodeNameLabel, l)
	}
	if v := e.VMI(t, "hand"); v.Status.NodeName != "n1" {
		t.Errorf("hand-bound VMI nodeName %q, want n1", v.Status.NodeName)
	}
}
