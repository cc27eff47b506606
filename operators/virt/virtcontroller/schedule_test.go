package virtcontroller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/virt/virtcontroller"
)

func node(name, cpu, mem string, labels map[string]string, taints ...corev1.Taint) corev1.Node {
	l := map[string]string{v1alpha1.AgentLabel: "true"}
	for k, v := range labels {
		l[k] = v
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}
}

func vmiSpec(mem string, sel map[string]string, tol ...corev1.Toleration) *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "v" + strings.ToLower(mem)},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{NodeSelector: sel, Tolerations: tol,
			Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: ptrQ(resource.MustParse(mem))}}}}
}

var noSched = corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}

// TestSchedule is the pure decision table (the integration test below runs
// it through the API server).
func TestSchedule(t *testing.T) {
	tests := []struct {
		name    string
		vmi     *kubevirtv1.VirtualMachineInstance
		extra   corev1.ResourceList
		nodes   []corev1.Node
		placed  []virtcontroller.Placed
		want    string
		wantMsg string
	}{
		{"emptiest node wins", vmiSpec("1Gi", nil), nil,
			[]corev1.Node{node("a", "2", "4Gi", nil), node("b", "2", "8Gi", nil)}, nil, "b", ""},
		{"placed VMIs count", vmiSpec("1Gi", nil), nil,
			[]corev1.Node{node("a", "2", "4Gi", nil), node("b", "2", "8Gi", nil)},
			[]virtcontroller.Placed{{Node: "b", Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("7Gi")}}}, "a", ""},
		{"node selector", vmiSpec("1Gi", map[string]string{"zone": "z1"}), nil,
			[]corev1.Node{node("a", "2", "4Gi", map[string]string{"zone": "z1"}), node("b", "2", "8Gi", nil)}, nil, "a", ""},
		{"unresponsive agent rejects", vmiSpec("1Gi", nil), nil,
			[]corev1.Node{node("a", "2", "8Gi", map[string]string{kubevirtv1.NodeSchedulable: "false"}), node("b", "2", "2Gi", nil)}, nil, "b", ""},
		{"only an unresponsive agent", vmiSpec("1Gi", nil), nil,
			[]corev1.Node{node("a", "2", "8Gi", map[string]string{kubevirtv1.NodeSchedulable: "false"})}, nil, "", "0/1 nodes are available: 1 node(s) had an unresponsive VM agent."},
		{"taint rejects", vmiSpec("1Gi", nil), nil,
			[]corev1.Node{node("a", "2", "4Gi", nil, noSched), node("b", "2", "2Gi", nil)}, nil, "b", ""},
		{"toleration admits", vmiSpec("1Gi", nil, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}), nil,
			[]corev1.Node{node("a", "2", "4Gi", nil, noSched), node("b", "2", "2Gi", nil)}, nil, "a", ""},
		{"PreferNoSchedule ignored", vmiSpec("1Gi", nil), nil,
			[]corev1.Node{node("a", "2", "4Gi", nil, corev1.Taint{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule})}, nil, "a", ""},
		{"bridge resource", vmiSpec("1Gi", nil), corev1.ResourceList{"bridge.network.kubevirt.io/br0": resource.MustParse("1")},
			[]corev1.Node{node("a", "2", "8Gi", nil), func() corev1.Node {
				n := node("b", "2", "4Gi", nil)
				n.Status.Allocatable["bridge.network.kubevirt.io/br0"] = resource.MustParse("1k")
				return n
			}()}, nil, "b", ""},
		{"agent's allocatable annotation wins", vmiSpec("4Gi", nil), nil,
			[]corev1.Node{func() corev1.Node {
				n := node("a", "2", "64Gi", nil)
				n.Annotations = map[string]string{v1alpha1.AllocatableAnnotation: `{"memory":"2Gi"}`}
				return n
			}(), node("b", "2", "8Gi", nil)}, nil, "b", ""},
		{"unparsable annotation ignored", vmiSpec("4Gi", nil), nil,
			[]corev1.Node{func() corev1.Node {
				n := node("a", "2", "8Gi", nil)
				n.Annotations = map[string]string{v1alpha1.AllocatableAnnotation: `memory=2Gi`}
				return n
			}()}, nil, "a", ""},
		{"nothing fits", vmiSpec("6Gi", map[string]string{"zone": "z1"}), nil,
			[]corev1.Node{node("a", "2", "4Gi", map[string]string{"zone": "z1"}), node("b", "2", "4Gi", map[string]string{"zone": "z1"}),
				node("c", "2", "8Gi", nil), node("d", "2", "8Gi", map[string]string{"zone": "z1"}, noSched)}, nil, "",
			"0/4 nodes are available: 1 node(s) didn't match VMI's node affinity/selector, 1 node(s) had untolerated taint {dedicated: db}, 2 Insufficient memory."},
		{"no agent nodes", vmiSpec("1Gi", nil), nil, nil, nil, "",
			"0/0 nodes are available: no node runs the converge VM agent (label converge.dev/vm-agent=true)."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := virtcontroller.Schedule(tt.vmi, virtcontroller.Requests(tt.vmi, tt.extra), tt.nodes, tt.placed)
			if d.Node != tt.want || d.Message != tt.wantMsg {
				t.Errorf("Schedule = %+v, want node %q message %q", d, tt.want, tt.wantMsg)
			}
		})
	}
}

func TestRequestsDefaults(t *testing.T) {
	vmi := vmiSpec("1Gi", nil)
	vmi.Spec.Domain.CPU = &kubevirtv1.CPU{Cores: 2, Sockets: 2}
	r := virtcontroller.Requests(vmi, nil)
	if cpu, mem := r[corev1.ResourceCPU], r[corev1.ResourceMemory]; cpu.MilliValue() != 400 || mem.Value() != 1<<30 {
		t.Errorf("Requests = cpu %s memory %s, want 400m (4 vCPUs / ratio 10) and 1Gi", cpu.String(), mem.String())
	}
}

// TestSchedulerAPI binds VMIs through the API server: a fitting VMI gets
// status.nodeName and phase Scheduled; two that together overflow a node
// are not both placed there; an unfit one stays Pending with the message,
// and is placed once a node that fits appears.
func TestSchedulerAPI(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mk := func(n corev1.Node) { e.addNode(t, n) }
	mk(node("small", "2", "3Gi", nil))
	mk(node("tainted", "8", "64Gi", nil, noSched))
	noAgent := node("noagent", "8", "64Gi", nil)
	delete(noAgent.Labels, v1alpha1.AgentLabel)
	mk(noAgent)
	for _, name := range []string{"one", "two"} {
		v := vmiSpec("2Gi", nil)
		v.Name = name
		if err := e.c.Create(ctx, v); err != nil {
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
		one, two := e.vmi(t, "one"), e.vmi(t, "two")
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
	mk(node("big", "4", "16Gi", nil))
	controlplane.Eventually(t, 30*time.Second, func() bool {
		one, two := e.vmi(t, "one"), e.vmi(t, "two")
		return one.Status.NodeName != "" && two.Status.NodeName != "" && one.Status.NodeName != two.Status.NodeName
	})
}

func ptrQ(q resource.Quantity) *resource.Quantity { return &q }

// addNode creates n with its status (allocatable, Ready).
func (e *env) addNode(t *testing.T, n corev1.Node) {
	t.Helper()
	ctx := context.Background()
	st := n.Status
	if err := e.c.Create(ctx, &n); err != nil {
		t.Fatal(err)
	}
	// The API server's TaintNodesByCondition admission taints a new node
	// not-ready; the node lifecycle controller (not running here) lifts it
	// once the node is Ready: do that.
	taints := n.Spec.Taints[:0]
	for _, tn := range n.Spec.Taints {
		if tn.Key != corev1.TaintNodeNotReady {
			taints = append(taints, tn)
		}
	}
	n.Spec.Taints = taints
	if err := e.c.Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
	n.Status = st
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := e.c.Status().Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
}
