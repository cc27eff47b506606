package provisioner

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// TestClaimDataSource: dataSource wins over dataSourceRef, a
// dataSourceRef's namespace defaults to the claim's, and another namespace
// is refused.
func TestClaimDataSource(t *testing.T) {
	group, here, there := "snapshot.storage.k8s.io", "ns", "elsewhere"
	for _, tc := range []struct {
		name    string
		ds      *corev1.TypedLocalObjectReference
		ref     *corev1.TypedObjectReference
		want    *dataSourceRef
		wantErr bool
	}{
		{name: "none"},
		{name: "dataSource", ds: &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "a"},
			want: &dataSourceRef{kind: "PersistentVolumeClaim", namespace: here, name: "a"}},
		{name: "both: dataSource wins", ds: &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "a"},
			ref:  &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "b"},
			want: &dataSourceRef{kind: "PersistentVolumeClaim", namespace: here, name: "a"}},
		{name: "dataSourceRef", ref: &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "s"},
			want: &dataSourceRef{kind: "VolumeSnapshot", apiGroup: group, namespace: here, name: "s"}},
		{name: "dataSourceRef same namespace", ref: &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "b", Namespace: &here},
			want: &dataSourceRef{kind: "PersistentVolumeClaim", namespace: here, name: "b"}},
		{name: "cross-namespace refused", ref: &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "b", Namespace: &there}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: here, Name: "c"},
				Spec: corev1.PersistentVolumeClaimSpec{DataSource: tc.ds, DataSourceRef: tc.ref}}
			got, err := claimDataSource(claim)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestContentSourceKinds: no data source is an empty volume, a
// VolumeSnapshot is refused (InvalidArgument), a populator's kind is left
// to its populator (IgnoredError), a nameless source is refused.
func TestContentSourceKinds(t *testing.T) {
	snap, pop := "snapshot.storage.k8s.io", "cdi.kubevirt.io"
	for _, tc := range []struct {
		name    string
		ref     *corev1.TypedObjectReference
		ignored bool
		code    codes.Code
	}{
		{name: "none", code: codes.OK},
		{name: "snapshot", ref: &corev1.TypedObjectReference{APIGroup: &snap, Kind: "VolumeSnapshot", Name: "s"}, code: codes.InvalidArgument},
		{name: "populator", ref: &corev1.TypedObjectReference{APIGroup: &pop, Kind: "VolumeImportSource", Name: "i"}, ignored: true},
		{name: "nameless", ref: &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim"}, code: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
				Spec: corev1.PersistentVolumeClaimSpec{DataSourceRef: tc.ref}}
			src, _, err := (&Provisioner{}).contentSource(context.Background(), claim)
			if src != nil {
				t.Errorf("content source %v, want none", src)
			}
			var ign *controller.IgnoredError
			if tc.ignored != errors.As(err, &ign) {
				t.Fatalf("error %v, want ignored %v", err, tc.ignored)
			}
			if !tc.ignored && status.Code(err) != tc.code {
				t.Errorf("error %v, want code %s", err, tc.code)
			}
		})
	}
}
