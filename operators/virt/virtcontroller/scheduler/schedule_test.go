package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

var noSched = corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}

// TestSchedule is the pure decision table (the integration test below runs
// it through the API server).
func TestSchedule(t *testing.T) {
	tests := []struct {
		name    string
		vmi     *kubevirtv1.VirtualMachineInstance
		extra   corev1.ResourceList
		nodes   []corev1.Node
		placed  []scheduler.Placed
		want    string
		wantMsg string
	}{
		{"emptiest node wins", virttest.VMISpec("1Gi", nil), nil,
			[]corev1.Node{virttest.Node("a", "2", "4Gi", nil), virttest.Node("b", "2", "8Gi", nil)}, nil, "b", ""},
		{"placed VMIs count", virttest.VMISpec("1Gi", nil), nil,
			[]corev1.Node{virttest.Node("a", "2", "4Gi", nil), virttest.Node("b", "2", "8Gi", nil)},
			[]scheduler.Placed{{Node: "b", Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("7Gi")}}}, "a", ""},
		{"node selector", virttest.VMISpec("1Gi", map[string]string{"zone": "z1"}), nil,
			[]corev1.Node{virttest.Node("a", "2", "4Gi", map[string]string{"zone": "z1"}), virttest.Node("b", "2", "8Gi", nil)}, nil, "a", ""},
		{"unresponsive agent rejects", virttest.VMISpec("1Gi", nil), nil,
			[]corev1.Node{virttest.Node("a", "2", "8Gi", map[string]string{kubevirtv1.NodeSchedulable: "false"}), virttest.Node("b", "2", "2Gi", nil)}, nil, "b", ""},
		{"only an unresponsive agent", virttest.VMISpec("1Gi", nil), nil,
			[]corev1.Node{virttest.Node("a", "2", "8Gi", map[string]string{kubevirtv1.NodeSchedulable: "false"})}, nil, "", "0/1 nodes are available: 1 node(s) had an unresponsive VM agent."},
		{"taint rejects", virttest.VMISpec("1Gi", nil), nil,
			[]corev1.Node{virttest.Node("a", "2", "4Gi", nil, noSched), virttest.Node("b", "2", "2Gi", nil)}, nil, "b", ""},
		{"toleration admits", virttest.VMISpec("1Gi", nil, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}), nil,
			[]corev1.Node{virttest.Node("a", "2", "4Gi", nil, noSched), virttest.Node("b", "2", "2Gi", nil)}, nil, "a", ""},
		{"PreferNoSchedule ignored", virttest.VMISpec("1Gi", nil), nil,
			[]corev1.Node{virttest.Node("a", "2", "4Gi", nil, corev1.Taint{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule})}, nil, "a", ""},
		{"bridge resource", virttest.VMISpec("1Gi", nil), corev1.ResourceList{"bridge.network.kubevirt.io/br0": resource.MustParse("1")},
			[]corev1.Node{virttest.Node("a", "2", "8Gi", nil), func() corev1.Node {
				n := virttest.Node("b", "2", "4Gi", nil)
				n.Status.Allocatable["bridge.network.kubevirt.io/br0"] = resource.MustParse("1k")
				return n
			}()}, nil, "b", ""},
		{"agent's allocatable annotation wins", virttest.VMISpec("4Gi", nil), nil,
			[]corev1.Node{func() corev1.Node {
				n := virttest.Node("a", "2", "64Gi", nil)
				n.Annotations = map[string]string{v1alpha1.AllocatableAnnotation: `{"memory":"2Gi"}`}
				return n
			}(), virttest.Node("b", "2", "8Gi", nil)}, nil, "b", ""},
		{"unparsable annotation ignored", virttest.VMISpec("4Gi", nil), nil,
			[]corev1.Node{func() corev1.Node {
				n := virttest.Node("a", "2", "8Gi", nil)
				n.Annotations = map[string]string{v1alpha1.AllocatableAnnotation: `memory=2Gi`}
				return n
			}()}, nil, "a", ""},
		{"nothing fits", virttest.VMISpec("6Gi", map[string]string{"zone": "z1"}), nil,
			[]corev1.Node{virttest.Node("a", "2", "4Gi", map[string]string{"zone": "z1"}), virttest.Node("b", "2", "4Gi", map[string]string{"zone": "z1"}),
				virttest.Node("c", "2", "8Gi", nil), virttest.Node("d", "2", "8Gi", map[string]string{"zone": "z1"}, noSched)}, nil, "",
			"0/4 nodes are available: 1 node(s) didn't match VMI's node affinity/selector, 1 node(s) had untolerated taint {dedicated: db}, 2 Insufficient memory."},
		{"no agent nodes", virttest.VMISpec("1Gi", nil), nil, nil, nil, "",
			"0/0 nodes are available: no node runs the converge VM agent (label converge.dev/vm-agent=true)."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := scheduler.Schedule(tt.vmi, scheduler.Requests(tt.vmi, tt.extra), tt.nodes, tt.placed)
			if d.Node != tt.want || d.Message != tt.wantMsg {
				t.Errorf("Schedule = %+v, want node %q message %q", d, tt.want, tt.wantMsg)
			}
		})
	}
}

func TestRequestsDefaults(t *testing.T) {
	vmi := virttest.VMISpec("1Gi", nil)
	vmi.Spec.Domain.CPU = &kubevirtv1.CPU{Cores: 2, Sockets: 2}
	r := scheduler.Requests(vmi, nil)
	if cpu, mem := r[corev1.ResourceCPU], r[corev1.ResourceMemory]; cpu.MilliValue() != 400 || mem.Value() != 1<<30 {
		t.Errorf("Requests = cpu %s memory %s, want 400m (4 vCPUs / ratio 10) and 1Gi", cpu.String(), mem.String())
	}
}

// TestRequestsWith: KubeVirt's cpuAllocationRatio and memoryOvercommit
// turn a VMI without requests into requests; explicit requests win.
func TestRequestsWith(t *testing.T) {
	vmi := virttest.VMISpec("1Gi", nil)
	vmi.Spec.Domain.CPU = &kubevirtv1.CPU{Cores: 2, Sockets: 2}
	for _, tc := range []struct {
		name     string
		ratios   scheduler.Ratios
		vmi      *kubevirtv1.VirtualMachineInstance
		cpuMilli int64
		memory   int64
	}{
		{"defaults", scheduler.DefaultRatios(), vmi, 400, 1 << 30},
		{"cpuAllocationRatio 4", scheduler.Ratios{CPUAllocationRatio: 4, MemoryOvercommit: 100}, vmi, 1000, 1 << 30},
		{"cpuAllocationRatio 1: a CPU per vCPU", scheduler.Ratios{CPUAllocationRatio: 1, MemoryOvercommit: 100}, vmi, 4000, 1 << 30},
		{"memoryOvercommit 200: half the guest memory", scheduler.Ratios{CPUAllocationRatio: 10, MemoryOvercommit: 200}, vmi, 400, 1 << 29},
		{"unset ratios count as the defaults", scheduler.Ratios{}, vmi, 400, 1 << 30},
		{"explicit requests win", scheduler.Ratios{CPUAllocationRatio: 1, MemoryOvercommit: 200}, func() *kubevirtv1.VirtualMachineInstance {
			v := vmi.DeepCopy()
			v.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("2Gi")}
			return v
		}(), 250, 2 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := scheduler.RequestsWith(tc.vmi, nil, tc.ratios)
			if cpu, mem := r[corev1.ResourceCPU], r[corev1.ResourceMemory]; cpu.MilliValue() != tc.cpuMilli || mem.Value() != tc.memory {
				t.Errorf("RequestsWith = cpu %s memory %s, want %dm and %d", cpu.String(), mem.String(), tc.cpuMilli, tc.memory)
			}
		})
	}
}

// TestSchedulerAPI binds VMIs through the API server: a fitting VMI gets
// status.nodeName and phase Scheduled; two that together overflow a node
// are not both placed there; an unfit one stays Pending with the message,
// and is placed once a node that fits appears.
func TestSchedulerAPI(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mk := func(n corev1.Node) { e.AddNode(t, n) }
	mk(virttest.Node("small", "2", "3Gi", nil))
	mk(virttest.Node("tainted", "8", "64Gi", nil, noSched))
	noAgent := virttest.Node("noagent", "8", "64Gi", nil)
	delete(noAgent.Labels, v1alpha1.AgentLabel)
	mk(noAgent)
	for _, name := range []string{"one", "two"} {
		v := virttest.VMISpec("2Gi", nil)
		v.Name = name
		if err := e.C.Create(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	// Until the scheduler's cache shows the nodes Ready (not-ready taint
	// lifted) the message may name that taint: wait for the final one.
	want := "0/2 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {dedicated: db}."
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("last state:", last)
		}
	})
	start := time.Now()
	controlplane.Eventually(t, 30*time.Second, func() bool {
		one, two := e.VMI(t, "one"), e.VMI(t, "two")
		last = fmt.Sprintf("one %s %q %v; two %s %q %v", one.Status.Phase, one.Status.NodeName, one.Status.Conditions, two.Status.Phase, two.Status.NodeName, two.Status.Conditions)
		bound, pending := 0, 0
		for _, v := range []*kubevirtv1.VirtualMachineInstance{one, two} {
			switch {
			case v.Status.NodeName == "small" && v.Status.Phase == kubevirtv1.Scheduled:
				bound++
			case v.Status.NodeName == "" && v.Status.Phase == kubevirtv1.Pending:
				for _, c := range v.Status.Conditions {
					if c.Type == "PodScheduled" && c.Status == corev1.ConditionFalse && c.Reason == "Unschedulable" && c.Message == want {
						pending++
					}
				}
			}
		}
		return bound == 1 && pending == 1
	})
	t.Logf("one bound, one unschedulable with %q after %v", want, time.Since(start))
	mk(virttest.Node("big", "4", "16Gi", nil))
	controlplane.Eventually(t, 30*time.Second, func() bool {
		one, two := e.VMI(t, "one"), e.VMI(t, "two")
		return one.Status.NodeName != "" && two.Status.NodeName != "" && one.Status.NodeName != two.Status.NodeName
	})
}

// TestDeletedVMIFreesItsNode: a VMI bound and then deleted before any
// other scheduling decision (a VMI that failed at once and whose VM
// replaced it) no longer holds its requests: the next VMI that needs the
// same room is bound. Found by the issue 15 chain on the real cluster,
// where such VMIs piled up until every VMI was "Insufficient cpu".
func TestDeletedVMIFreesItsNode(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.AddNode(t, virttest.Node("small", "2", "3Gi", nil))
	first := virttest.VMISpec("2Gi", nil)
	first.Name = "first"
	if err := e.C.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.VMI(t, "first").Status.NodeName == "small" })
	if err := e.C.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return apierrors.IsNotFound(e.C.Get(ctx, client.ObjectKeyFromObject(first), &kubevirtv1.VirtualMachineInstance{}))
	})
	second := virttest.VMISpec("2Gi", nil)
	second.Name = "second"
	if err := e.C.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	var last *kubevirtv1.VirtualMachineInstance
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			t.Logf("second: phase %s node %q conditions %v", last.Status.Phase, last.Status.NodeName, last.Status.Conditions)
		}
	})
	controlplane.Eventually(t, 30*time.Second, func() bool {
		last = e.VMI(t, "second")
		return last.Status.NodeName == "small"
	})
}
