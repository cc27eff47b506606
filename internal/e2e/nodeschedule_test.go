package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

// TestRegisteredNodeIsSchedulable checks the two sides of the Node contract
// (api/v1alpha1 AgentLabel and AllocatableAnnotation) together, on a real
// API server: the Node the VM agent registers (agent.RegisterNode, 2 GiB
// of memory minus a 512Mi reserve) is one the virt-controller's scheduler
// (scheduler.Schedule) places a VMI on when it fits (1Gi) and refuses
// when it asks for more than the node offers (2Gi). It needs no root and
// no libvirt, only the control plane binaries in bin/.
func TestRegisteredNodeIsSchedulable(t *testing.T) {
	_, c, _ := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme)
	ctx := context.Background()
	meminfo := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(meminfo, []byte("MemTotal: 2097152 kB\n"), 0o644); err != nil { // 2 GiB
		t.Fatal(err)
	}
	opts := agent.DefaultNodeOptions("reg-node")
	opts.MeminfoPath = meminfo
	opts.ReservedMemory = resource.MustParse("512Mi")
	opts.CPUs = 2
	if err := agent.RegisterNode(ctx, c, opts); err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{}
	if err := c.Get(ctx, types.NamespacedName{Name: "reg-node"}, n); err != nil {
		t.Fatalf("Node not registered: %v", err)
	}
	for _, tc := range []struct {
		mem  string
		fits bool
	}{{"1Gi", true}, {"2Gi", false}} {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		q := resource.MustParse(tc.mem)
		vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
		d := scheduler.Schedule(vmi, scheduler.Requests(vmi, nil), []corev1.Node{*n}, nil)
		if (d.Node == "reg-node") != tc.fits {
			t.Errorf("VMI of %s on the registered node: %+v, want fits=%t", tc.mem, d, tc.fits)
		}
	}
}
