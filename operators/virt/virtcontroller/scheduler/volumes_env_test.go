package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

// claimVMI is a VMI name with one persistentVolumeClaim volume of claim.
func claimVMI(name, claim string) *kubevirtv1.VirtualMachineInstance {
	v := virttest.VMISpec("1Gi", nil)
	v.Name = name
	v.Spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "disk"}}
	v.Spec.Volumes = []kubevirtv1.Volume{{Name: "disk", VolumeSource: kubevirtv1.VolumeSource{
		PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}
	return v
}

// condition gives the VMI's condition t as "Status/Reason: message", ""
// when absent.
func condition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) string {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return ""
}

// TestVolumeScheduling places VMIs with claims through the API server on
// two agent nodes the kubelet labelled with the hostpath CSI topology: a
// claim bound to a volume on b puts its VMI on b (a, as empty and first
// by name, would win otherwise); a missing claim holds its VMI with
// KubeVirt's FailedPvcNotFound until it appears and is bound; an unbound
// claim of no StorageClass (immediate binding) leaves its VMI
// Unschedulable naming it; an unbound WaitForFirstConsumer claim gets the
// VMI's node as its selected node and the VMI waits, PodScheduled=False
// WaitingForVolumeBinding, until the claim is bound there.
func TestVolumeScheduling(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	if err := e.C.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: virttest.HostpathClass},
		Provisioner: "kubevirt.io.hostpath-provisioner", VolumeBindingMode: &wffc}); err != nil {
		t.Fatal(err)
	}
	e.AddNode(t, csiNode("a"))
	e.AddNode(t, csiNode("b"))
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("last state:", last)
		}
	})
	vmiState := func(name string) *kubevirtv1.VirtualMachineInstance {
		v := e.VMI(t, name)
		last = fmt.Sprintf("%s: phase %s node %q conditions %+v", name, v.Status.Phase, v.Status.NodeName, v.Status.Conditions)
		return v
	}
	claim := func(name string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{}
		if err := e.C.Get(ctx, types.NamespacedName{Namespace: e.NS, Name: name}, c); err != nil {
			t.Fatal(err)
		}
		return c
	}

	// Bound on b.
	e.CreateBound(t, "root", "b")
	if err := e.C.Create(ctx, claimVMI("on-b", "root")); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool { return vmiState("on-b").Status.NodeName != "" })
	if n := e.VMI(t, "on-b").Status.NodeName; n != "b" {
		t.Fatalf("VMI on-b went to %q, want b, where its claim's volume is", n)
	}

	// Missing, then bound on a.
	if err := e.C.Create(ctx, claimVMI("late", "late-disk")); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		v := vmiState("late")
		return v.Status.Phase == kubevirtv1.Pending &&
			condition(v, kubevirtv1.VirtualMachineInstanceSynchronized) == "False/FailedPvcNotFound: PVC vms/late-disk does not exist, waiting for it to appear"
	})
	e.CreateBound(t, "late-disk", "a")
	controlplane.Eventually(t, 30*time.Second, func() bool {
		v := vmiState("late")
		return v.Status.NodeName == "a" && condition(v, kubevirtv1.VirtualMachineInstanceSynchronized) == ""
	})

	// Unbound, immediate binding: nothing will bind it.
	loose := virttest.PVC("loose")
	loose.Spec.StorageClassName = new(string)
	if err := e.C.Create(ctx, loose); err != nil {
		t.Fatal(err)
	}
	if err := e.C.Create(ctx, claimVMI("stuck", "loose")); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return condition(vmiState("stuck"), "PodScheduled") ==
			"False/Unschedulable: 0/2 nodes are available: VMI has unbound immediate PersistentVolumeClaims (loose)."
	})

	// Unbound, WaitForFirstConsumer: provisioned on the VMI's node.
	if err := e.C.Create(ctx, virttest.PVC("fresh")); err != nil {
		t.Fatal(err)
	}
	if err := e.C.Create(ctx, claimVMI("first-consumer", "fresh")); err != nil {
		t.Fatal(err)
	}
	var node string
	controlplane.Eventually(t, 30*time.Second, func() bool {
		node = claim("fresh").Annotations[scheduler.AnnSelectedNode]
		v := vmiState("first-consumer")
		return node != "" && v.Status.NodeName == "" &&
			condition(v, "PodScheduled") == "False/WaitingForVolumeBinding: waiting for PersistentVolumeClaims fresh to be bound on node "+node
	})
	e.Bind(t, "fresh", node)
	controlplane.Eventually(t, 30*time.Second, func() bool {
		v := vmiState("first-consumer")
		return v.Status.NodeName == node && v.Status.Phase == kubevirtv1.Scheduled && condition(v, "PodScheduled") == "True/: "
	})
	if n := e.VMI(t, "stuck").Status.NodeName; n != "" {
		t.Errorf("VMI stuck went to %q with its claim unbound", n)
	}
}
