package provisioner_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/internal/snapshotcrds"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

// installSnapshotCRDs creates the pinned snapshot.storage.k8s.io CRDs and
// waits until they are Established.
func (f *fixture) installSnapshotCRDs(t *testing.T) {
	t.Helper()
	crds, err := snapshotcrds.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	ext, err := apiextensionsclient.NewForConfig(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, crd := range crds {
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, crd := range crds {
		controlplane.Eventually(t, 30*time.Second, func() bool {
			got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true
				}
			}
			return false
		})
	}
}

// readySnapshot records a CSI snapshot (handle) as a ready VolumeSnapshot
// name bound to its VolumeSnapshotContent, as the snapshot controller and
// csi-snapshotter leave them, with restoreSize size.
func (f *fixture) readySnapshot(t *testing.T, name, handle, size string) {
	t.Helper()
	ctx := context.Background()
	contentName := "snapcontent-" + name
	content, err := f.snaps.SnapshotV1().VolumeSnapshotContents().Create(ctx, &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: contentName},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: ns, Name: name},
			DeletionPolicy:    snapv1.VolumeSnapshotContentRetain,
			Driver:            hostpath.DefaultDriverName,
			Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready, rs := true, resource.MustParse(size)
	content.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: &ready}
	if _, err := f.snaps.SnapshotV1().VolumeSnapshotContents().UpdateStatus(ctx, content, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	snap, err := f.snaps.SnapshotV1().VolumeSnapshots(ns).Create(ctx, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &contentName}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snap.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &contentName, ReadyToUse: &ready, RestoreSize: &rs}
	if _, err := f.snaps.SnapshotV1().VolumeSnapshots(ns).UpdateStatus(ctx, snap, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRestore: a PVC whose data source is a ready VolumeSnapshot of the
// driver is provisioned from the snapshot (CSI CreateVolume with a
// snapshot content source): it holds the source's bytes as they were
// when the snapshot was taken, not as they are now.
func TestRestore(t *testing.T) {
	f := start(t)
	f.installSnapshotCRDs(t)
	src := f.claim(t, "golden", wffcClass, "10Mi", false)
	f.selectNode(t, src, node)
	srcPV := f.waitBound(t, src)
	path := dataPath(f.pool, srcPV, false)
	if err := os.WriteFile(path, []byte("before the snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, err := f.drivers[node].Controller().CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: "snap-golden", SourceVolumeId: srcPV.Spec.CSI.VolumeHandle})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("after the snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.readySnapshot(t, "golden-snap", resp.Snapshot.SnapshotId, "10Mi")

	group := snapv1.GroupName
	class := wffcClass
	restored := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restored"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}},
			DataSource:       &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "golden-snap"},
		},
	}
	f.mk(t, restored)
	f.selectNode(t, restored, node)
	pv := f.waitBound(t, restored)
	got, err := os.ReadFile(dataPath(f.pool, pv, false))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte("before the snapshot")) {
		t.Errorf("restored volume holds %q, want %q", got, "before the snapshot")
	}
}
