package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/nodeplane/vm/agent"
)

func meminfo(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHostAllocatable: MemTotal minus the reserve (never below 0) and the
// CPU count; malformed meminfo files are errors naming the file.
func TestHostAllocatable(t *testing.T) {
	for _, tc := range []struct {
		name, meminfo, reserved string
		cpus                    int
		wantMem, wantErr        string
	}{
		{name: "reserve subtracted", meminfo: "MemFree: 1 kB\nMemTotal:        4194304 kB\n", reserved: "1Gi", cpus: 2, wantMem: "3Gi"},
		{name: "no reserve", meminfo: "MemTotal: 1048576 kB\n", reserved: "0", cpus: 1, wantMem: "1Gi"},
		{name: "reserve above total", meminfo: "MemTotal: 1024 kB\n", reserved: "1Gi", cpus: 4, wantMem: "0"},
		{name: "no MemTotal", meminfo: "MemFree: 1 kB\n", reserved: "0", wantErr: "no MemTotal line"},
		{name: "unit", meminfo: "MemTotal: 1024 MB\n", reserved: "0", wantErr: `expected "MemTotal: <n> kB"`},
		{name: "number", meminfo: "MemTotal: lots kB\n", reserved: "0", wantErr: `MemTotal "lots", expected a positive number of kB`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := agent.DefaultNodeOptions("n")
			opts.MeminfoPath = meminfo(t, tc.meminfo)
			opts.ReservedMemory = resource.MustParse(tc.reserved)
			opts.CPUs = tc.cpus
			got, err := agent.HostAllocatable(opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), opts.MeminfoPath) {
					t.Fatalf("error %v, want one naming %s and saying %q", err, opts.MeminfoPath, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m := got[corev1.ResourceMemory]; m.Cmp(resource.MustParse(tc.wantMem)) != 0 {
				t.Errorf("memory %s, want %s", m.String(), tc.wantMem)
			}
			if c := got[corev1.ResourceCPU]; c.Value() != int64(tc.cpus) {
				t.Errorf("cpu %s, want %d", c.String(), tc.cpus)
			}
		})
	}
}

// TestRegisterNode on a real API server: the Node is created when absent
// and gets the agent label and the allocatable annotation as a JSON
// resource list (that the VMI scheduler places VMIs by it is checked
// across both sides in internal/e2e, TestRegisteredNodeIsSchedulable); a
// second registration keeps labels others set and refreshes the heartbeat.
func TestRegisterNode(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	opts := agent.DefaultNodeOptions("reg-node")
	opts.MeminfoPath = meminfo(t, "MemTotal: 2097152 kB\n") // 2 GiB
	opts.ReservedMemory = resource.MustParse("512Mi")
	opts.CPUs = 2
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	opts.Now = func() time.Time { return t0 }
	kvm := corev1.NodeCondition{Type: v1alpha1.KVMCondition, Status: corev1.ConditionFalse, Reason: v1alpha1.KVMReasonPVM, Message: "VMs run under TCG: kvm_pvm"}
	opts.Conditions = []corev1.NodeCondition{kvm}
	if err := agent.RegisterNode(ctx, e.c, opts); err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{}
	if err := e.c.Get(ctx, types.NamespacedName{Name: "reg-node"}, n); err != nil {
		t.Fatalf("Node not registered: %v", err)
	}
	if n.Labels[v1alpha1.AgentLabel] != "true" || n.Labels[kubevirtv1.NodeSchedulable] != "true" {
		t.Errorf("labels %v, want %s=true and %s=true", n.Labels, v1alpha1.AgentLabel, kubevirtv1.NodeSchedulable)
	}
	var alloc corev1.ResourceList
	if err := json.Unmarshal([]byte(n.Annotations[v1alpha1.AllocatableAnnotation]), &alloc); err != nil {
		t.Fatalf("annotation %s=%q: %v", v1alpha1.AllocatableAnnotation, n.Annotations[v1alpha1.AllocatableAnnotation], err)
	}
	if m := alloc[corev1.ResourceMemory]; m.Cmp(resource.MustParse("1536Mi")) != 0 {
		t.Errorf("allocatable memory %s, want 1536Mi", m.String())
	}
	if got := n.Annotations[kubevirtv1.VirtHandlerHeartbeat]; got != "2026-01-02T03:04:05Z" {
		t.Errorf("heartbeat %q", got)
	}
	// no kubelet here: the agent removed the API server's not-ready taint
	// and set Ready
	for _, taint := range n.Spec.Taints {
		if taint.Key == agent.NotReadyTaint {
			t.Errorf("taint %v still on the Node", taint)
		}
	}
	if c := condition(n, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue || len(n.Status.Conditions) != 2 {
		t.Errorf("node conditions %+v, want Ready=True and %s", n.Status.Conditions, v1alpha1.KVMCondition)
	}
	checkKVM(t, n, corev1.ConditionFalse, kvm.Message, t0, t0)
	// someone else's label and taint survive; the heartbeat moves
	n.Labels["team"] = "a"
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "team", Value: "a", Effect: corev1.TaintEffectNoSchedule})
	if err := e.c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	t0 = t0.Add(time.Minute)
	if err := agent.RegisterNode(ctx, e.c, opts); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Get(ctx, types.NamespacedName{Name: "reg-node"}, n); err != nil {
		t.Fatal(err)
	}
	if n.Labels["team"] != "a" || n.Labels[v1alpha1.AgentLabel] != "true" {
		t.Errorf("labels after re-registration %v", n.Labels)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "team" {
		t.Errorf("taints after re-registration %v, want team's kept", n.Spec.Taints)
	}
	if got := n.Annotations[kubevirtv1.VirtHandlerHeartbeat]; got != "2026-01-02T03:05:05Z" {
		t.Errorf("heartbeat after re-registration %q", got)
	}
	// the stand-in Ready kept the agent's condition, which was not
	// rewritten (unchanged)
	if c := condition(n, corev1.NodeReady); c == nil || !c.LastHeartbeatTime.Time.Equal(t0) {
		t.Errorf("Ready after re-registration %+v, want a heartbeat of %s", c, t0)
	}
	first := t0.Add(-time.Minute)
	checkKVM(t, n, corev1.ConditionFalse, kvm.Message, first, first)
	// a new message: rewritten, transition time kept; a new status: both move
	for _, step := range []struct {
		status     corev1.ConditionStatus
		message    string
		transition time.Time
	}{{corev1.ConditionFalse, "VMs run under TCG: no /dev/kvm", first}, {corev1.ConditionTrue, "VMs run under KVM", t0.Add(2 * time.Minute)}} {
		t0 = t0.Add(time.Minute)
		opts.Conditions[0].Status, opts.Conditions[0].Message = step.status, step.message
		if err := agent.RegisterNode(ctx, e.c, opts); err != nil {
			t.Fatal(err)
		}
		if err := e.c.Get(ctx, types.NamespacedName{Name: "reg-node"}, n); err != nil {
			t.Fatal(err)
		}
		checkKVM(t, n, step.status, step.message, t0, step.transition)
	}

	// a bad meminfo is refused before anything is written
	opts.Name, opts.MeminfoPath = "other-node", filepath.Join(t.TempDir(), "none")
	if err := agent.RegisterNode(ctx, e.c, opts); err == nil || !strings.Contains(err.Error(), "Node other-node") {
		t.Errorf("RegisterNode with no meminfo: %v, want an error naming Node other-node", err)
	}
	if err := e.c.Get(ctx, types.NamespacedName{Name: "other-node"}, &corev1.Node{}); err == nil {
		t.Errorf("Node other-node created although its registration failed")
	}
}

func condition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// checkKVM checks the agent's KVM condition on n: status, message, the
// heartbeat of its last write and its transition time.
func checkKVM(t *testing.T, n *corev1.Node, status corev1.ConditionStatus, message string, heartbeat, transition time.Time) {
	t.Helper()
	c := condition(n, v1alpha1.KVMCondition)
	if c == nil {
		t.Fatalf("no condition %s in %+v", v1alpha1.KVMCondition, n.Status.Conditions)
	}
	if c.Status != status || c.Message != message || c.Reason != v1alpha1.KVMReasonPVM {
		t.Errorf("condition %s = %s %s %q, want %s %s %q", c.Type, c.Status, c.Reason, c.Message, status, v1alpha1.KVMReasonPVM, message)
	}
	if !c.LastHeartbeatTime.Time.Equal(heartbeat) || !c.LastTransitionTime.Time.Equal(transition) {
		t.Errorf("condition %s times: heartbeat %s transition %s, want %s and %s", c.Type, c.LastHeartbeatTime, c.LastTransitionTime, heartbeat, transition)
	}
}
