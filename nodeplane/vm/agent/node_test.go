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
	if len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Type != corev1.NodeReady || n.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("node conditions %+v, want Ready=True", n.Status.Conditions)
	}
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

	// a bad meminfo is refused before anything is written
	opts.Name, opts.MeminfoPath = "other-node", filepath.Join(t.TempDir(), "none")
	if err := agent.RegisterNode(ctx, e.c, opts); err == nil || !strings.Contains(err.Error(), "Node other-node") {
		t.Errorf("RegisterNode with no meminfo: %v, want an error naming Node other-node", err)
	}
	if err := e.c.Get(ctx, types.NamespacedName{Name: "other-node"}, &corev1.Node{}); err == nil {
		t.Errorf("Node other-node created although its registration failed")
	}
}
