package provisioner

import (
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// TestRestoreSource: a ready snapshot bound to a content of the driver
// gives its snapshot handle; what may still become ready is retried
// (FailedPrecondition, NoChange), what cannot is refused (InvalidArgument,
// Finished), as csi-provisioner's getSnapshotSource.
func TestRestoreSource(t *testing.T) {
	const driver = "hostpath.csi.converge.dev"
	yes, no, handle := true, false, "snap-1"
	ready := func(mod func(s *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent)) (*snapv1.VolumeSnapshot, *snapv1.VolumeSnapshotContent) {
		rs := resource.MustParse("10Mi")
		s := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: "u1"},
			Status: &snapv1.VolumeSnapshotStatus{ReadyToUse: &yes, RestoreSize: &rs}}
		c := &snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Spec:   snapv1.VolumeSnapshotContentSpec{Driver: driver, VolumeSnapshotRef: corev1.ObjectReference{Namespace: "ns", Name: "s", UID: "u1"}},
			Status: &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle}}
		if mod != nil {
			mod(s, c)
		}
		return s, c
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name    string
		mod     func(s *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent)
		unbound bool
		code    codes.Code
	}{
		{name: "ready", code: codes.OK},
		{name: "unbound", unbound: true, code: codes.FailedPrecondition},
		{name: "deleting", mod: func(s *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) { s.DeletionTimestamp = &now }, code: codes.FailedPrecondition},
		{name: "content bound elsewhere", mod: func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) { c.Spec.VolumeSnapshotRef.UID = "u2" }, code: codes.FailedPrecondition},
		{name: "no handle yet", mod: func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) { c.Status = nil }, code: codes.FailedPrecondition},
		{name: "not ready", mod: func(s *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) { s.Status.ReadyToUse = &no }, code: codes.FailedPrecondition},
		{name: "other driver", mod: func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) { c.Spec.Driver = "other" }, code: codes.InvalidArgument},
		{name: "smaller than restore size", mod: func(s *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
			rs := resource.MustParse("20Mi")
			s.Status.RestoreSize = &rs
		}, code: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := ready(tc.mod)
			if tc.unbound {
				c = nil
			}
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"},
				Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}}}}
			src, state, err := restoreSource("r", claim, s, c, driver)
			if status.Code(err) != tc.code {
				t.Fatalf("error %v, want code %s", err, tc.code)
			}
			wantState := controller.ProvisioningFinished
			if tc.code == codes.FailedPrecondition {
				wantState = controller.ProvisioningNoChange
			}
			if state != wantState {
				t.Errorf("state %s, want %s", state, wantState)
			}
			if tc.code == codes.OK && src.GetSnapshot().GetSnapshotId() != handle {
				t.Errorf("content source %v, want snapshot %s", src, handle)
			}
			if tc.code != codes.OK && src != nil {
				t.Errorf("content source %v on error", src)
			}
		})
	}
}
