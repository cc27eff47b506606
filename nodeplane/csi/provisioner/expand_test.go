package provisioner_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/nodeplane/csi/loopdev"
	"github.com/converge-dev/converge/nodeplane/csi/resizer"
)

const expandClass = "hostpath-expand"

// expandable creates the WaitForFirstConsumer class expandClass with
// allowVolumeExpansion: true.
func (f *fixture) expandable(t *testing.T) {
	t.Helper()
	wffc, yes := storagev1.VolumeBindingWaitForFirstConsumer, true
	f.mk(t, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: expandClass}, Provisioner: hostpath.DefaultDriverName,
		Parameters: map[string]string{"storagePool": "local"}, VolumeBindingMode: &wffc, AllowVolumeExpansion: &yes})
}

// request sets the claim's spec.resources.requests.storage.
func (f *fixture) request(pvc *corev1.PersistentVolumeClaim, size string) error {
	patch := []byte(`{"spec":{"resources":{"requests":{"storage":"` + size + `"}}}}`)
	return f.c.Patch(context.Background(), pvc, client.RawPatch(types.MergePatchType, patch))
}

// waitCapacity waits until the claim's status.capacity is size with no
// resize condition and no storage allocatedResourceStatus left, and gives
// the claim and its PV.
func (f *fixture) waitCapacity(t *testing.T, pvc *corev1.PersistentVolumeClaim, size string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	t.Helper()
	want := resource.MustParse(size)
	got := &corev1.PersistentVolumeClaim{}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if f.c.Get(context.Background(), client.ObjectKeyFromObject(pvc), got) == nil {
			q := got.Status.Capacity[corev1.ResourceStorage]
			if q.Cmp(want) == 0 && len(resizeConditions(got)) == 0 && len(got.Status.AllocatedResourceStatuses) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("PVC %s: status %+v, want capacity %s and no resize condition or status", pvc.Name, got.Status, size)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pv := &corev1.PersistentVolume{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Name: got.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	return got, pv
}

// resizeConditions are the claim's conditions of the resize flow (others,
// such as kube-controller-manager's Unused, are not the resizer's).
func resizeConditions(pvc *corev1.PersistentVolumeClaim) []corev1.PersistentVolumeClaimCondition {
	var out []corev1.PersistentVolumeClaimCondition
	for _, c := range pvc.Status.Conditions {
		switch c.Type {
		case corev1.PersistentVolumeClaimResizing, corev1.PersistentVolumeClaimFileSystemResizePending,
			corev1.PersistentVolumeClaimControllerResizeError, corev1.PersistentVolumeClaimNodeResizeError:
			out = append(out, c)
		}
	}
	return out
}

// TestExpand: growing a Bound claim's request grows its volume through
// ControllerExpandVolume (and the in-process NodeExpandVolume for block):
// the disk file takes the new size, the PV's spec.capacity and the PVC's
// status.capacity say it, no resize condition is left, and the events are
// Resizing then VolumeResizeSuccessful.
func TestExpand(t *testing.T) {
	f := start(t)
	f.expandable(t)
	for _, tc := range []struct {
		name  string
		block bool
	}{
		{"block", true},
		{"filesystem", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pvc := f.claim(t, "grow-"+tc.name, expandClass, "10Mi", tc.block)
			f.selectNode(t, pvc, node)
			f.waitBound(t, pvc)
			start := time.Now()
			if err := f.request(pvc, "30Mi"); err != nil {
				t.Fatal(err)
			}
			got, pv := f.waitCapacity(t, pvc, "30Mi")
			t.Logf("%s: request 10Mi → 30Mi: PVC capacity 30Mi in %s", tc.name, time.Since(start))
			if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("30Mi")) != 0 {
				t.Errorf("PV capacity %s, want 30Mi", q.String())
			}
			if q := got.Status.AllocatedResources[corev1.ResourceStorage]; q.Cmp(resource.MustParse("30Mi")) != 0 {
				t.Errorf("PVC allocatedResources.storage %s, want 30Mi", q.String())
			}
			if tc.block {
				st, err := os.Stat(dataPath(f.pool, pv, true))
				if err != nil {
					t.Fatal(err)
				}
				if st.Size() != 30<<20 {
					t.Errorf("disk file %d bytes, want %d", st.Size(), 30<<20)
				}
			}
			f.waitEvent(t, pvc, resizer.ReasonResizing, pv.Name)
			f.waitEvent(t, pvc, resizer.ReasonResizeSuccessful, "succeeded")
		})
	}
}

// TestExpandRefusals: the API server refuses a request below
// status.capacity, and growth in a class without allowVolumeExpansion; a
// request beyond the pool's room fails with a VolumeResizeFailed event, a
// ControllerResizeError condition and status ControllerResizeInfeasible,
// and lowering it again recovers (RecoverVolumeExpansionFailure); a
// request above status.capacity but below the volume's size (the status
// lost after the volume grew) is refused by the resizer with an event and
// the claim finishes at the volume's size, which did not shrink.
func TestExpandRefusals(t *testing.T) {
	f := start(t)
	f.expandable(t)
	pvc := f.claim(t, "grow", expandClass, "10Mi", true)
	f.selectNode(t, pvc, node)
	f.waitBound(t, pvc)
	if err := f.request(pvc, "30Mi"); err != nil {
		t.Fatal(err)
	}
	f.waitCapacity(t, pvc, "30Mi")

	err := f.request(pvc, "20Mi")
	if err == nil {
		t.Fatal("request 30Mi → 20Mi (below status.capacity) accepted by the API server")
	}
	t.Logf("shrink below capacity refused by the API server: %v", err)

	fixed := f.claim(t, "fixed", wffcClass, "10Mi", true)
	f.selectNode(t, fixed, node)
	f.waitBound(t, fixed)
	if err := f.request(fixed, "20Mi"); err == nil {
		t.Error("growth in a class without allowVolumeExpansion accepted by the API server")
	} else {
		t.Logf("class without allowVolumeExpansion refused by the API server: %v", err)
	}

	if err := f.request(pvc, "1Pi"); err != nil {
		t.Fatal(err)
	}
	e := f.waitEvent(t, pvc, resizer.ReasonResizeFailed, "available")
	t.Logf("growth beyond the pool refused: %s", e.Message)
	got := &corev1.PersistentVolumeClaim{}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return f.c.Get(context.Background(), client.ObjectKeyFromObject(pvc), got) == nil &&
			got.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible
	})
	if c := resizeConditions(got); len(c) != 1 || c[0].Type != corev1.PersistentVolumeClaimControllerResizeError {
		t.Errorf("resize conditions %+v, want one ControllerResizeError", c)
	}
	if err := f.request(pvc, "40Mi"); err != nil {
		t.Fatalf("lowering a failed request 1Pi → 40Mi: %v", err)
	}
	_, pv := f.waitCapacity(t, pvc, "40Mi")

	// The status lost: capacity back to 10Mi while the volume has 40Mi.
	got = &corev1.PersistentVolumeClaim{}
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(pvc), got); err != nil {
		t.Fatal(err)
	}
	got.Status.Capacity[corev1.ResourceStorage] = resource.MustParse("10Mi")
	if err := f.c.Status().Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if err := f.request(pvc, "20Mi"); err != nil {
		t.Fatalf("request 40Mi → 20Mi with status.capacity 10Mi: %v", err)
	}
	e = f.waitEvent(t, pvc, resizer.ReasonResizeFailed, "cannot shrink")
	t.Logf("shrink refused by the resizer: %s", e.Message)
	f.waitCapacity(t, pvc, "40Mi")
	st, err := os.Stat(dataPath(f.pool, pv, true))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 40<<20 {
		t.Errorf("disk file %d bytes, want %d (no shrink)", st.Size(), 40<<20)
	}
}

// TestExpandPublished: a block volume published on the node (a loop
// device, as for a running VM's disk) grows under its user when its PVC
// asks for more: the device has the new size and keeps its bytes, with no
// kubelet involved (the resizer's in-process node step). Needs root.
func TestExpandPublished(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatal("needs root (loop devices) and CONVERGE_REQUIRE_NODEPLANE=1 is set")
		}
		t.Skip("needs root (loop devices)")
	}
	f := start(t)
	f.expandable(t)
	pvc := f.claim(t, "vm-disk", expandClass, "10Mi", true)
	f.selectNode(t, pvc, node)
	pv := f.waitBound(t, pvc)
	ctx := context.Background()
	d := f.drivers[node]
	target := filepath.Join(t.TempDir(), "dev")
	blockCap := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER}}
	if _, err := d.Node().NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle, TargetPath: target, VolumeCapability: blockCap, VolumeContext: pv.Spec.CSI.VolumeAttributes}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := d.Node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle, TargetPath: target}); err != nil {
			t.Error(err)
		}
	})
	dev, err := os.OpenFile(target, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if _, err := dev.WriteAt([]byte("before expansion"), 4096); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := f.request(pvc, "64Mi"); err != nil {
		t.Fatal(err)
	}
	f.waitCapacity(t, pvc, "64Mi")
	t.Logf("published block volume: request 10Mi → 64Mi: PVC capacity 64Mi in %s", time.Since(start))
	n, err := loopdev.Size(dev)
	if err != nil {
		t.Fatal(err)
	}
	if n != 64<<20 {
		t.Errorf("published device %d bytes, want %d", n, 64<<20)
	}
	buf := make([]byte, 16)
	if _, err := dev.ReadAt(buf, 4096); err != nil || string(buf) != "before expansion" {
		t.Errorf("device bytes after expansion %q (%v), want %q", buf, err, "before expansion")
	}
	if _, err := dev.WriteAt([]byte("after"), 60<<20); err != nil {
		t.Errorf("writing past the old end: %v", err)
	}
}
