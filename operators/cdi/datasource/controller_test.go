package datasource_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/operators/cdi/datasource"
)

const ns = "os-images"

func dataVolume(name string, phase cdiv1.DataVolumePhase) *cdiv1.DataVolume {
	return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		Status: cdiv1.DataVolumeStatus{Phase: phase}}
}

func pvc(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
}

func fromPVC(pvcNS, name string) cdiv1.DataSourceSource {
	return cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: pvcNS, Name: name}}
}

func fromDataSource(name string) cdiv1.DataSourceSource {
	return cdiv1.DataSourceSource{DataSource: &cdiv1.DataSourceRefSourceDataSource{Name: name}}
}

// ready gives ds's Ready condition as "Status Reason: message".
func ready(ds *cdiv1.DataSource) string {
	for _, c := range ds.Status.Conditions {
		if c.Type == cdiv1.DataSourceReady {
			return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return ""
}

// waitReady polls DataSource name until its Ready condition reads want.
func waitReady(t *testing.T, c client.Client, name, want string) *cdiv1.DataSource {
	t.Helper()
	ds := &cdiv1.DataSource{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ds)
		if err == nil && ready(ds) == want {
			return ds
		}
		if time.Now().After(deadline) {
			t.Fatalf("DataSource %s: Ready %q (get: %v), want %q", name, ready(ds), err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReady runs the DataSource controller on a real API server: each
// DataSource's Ready condition as CDI's datasource-controller sets it for
// its source (the package doc's table), status.source the resolved
// source while Ready and empty otherwise, and a
// DataVolume finishing its import moves a DataSource naming it (directly
// or through another DataSource) to Ready without a resync.
func TestReady(t *testing.T) {
	env, c, scheme := controlplane.StartEnvForTest(t, cdiv1.AddToScheme)
	crdtest.Install(t, c, "datasources", "datavolumes")
	ctx := context.Background()
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}))
	for _, dv := range []*cdiv1.DataVolume{dataVolume("imported", cdiv1.Succeeded), dataVolume("importing", cdiv1.ImportInProgress), dataVolume("fresh", "")} {
		phase := dv.Status.Phase
		must(t, c.Create(ctx, dv))
		if phase != "" {
			dv.Status.Phase = phase
			must(t, c.Status().Update(ctx, dv))
		}
	}
	must(t, c.Create(ctx, pvc("plain")))
	p := pvc("far")
	p.Namespace = "elsewhere"
	must(t, c.Create(ctx, p))

	imported := fromPVC("", "imported")
	cases := []struct {
		name   string
		source cdiv1.DataSourceSource
		want   string
		// resolved is status.source while Ready (nil: the spec's).
		resolved *cdiv1.DataSourceSource
	}{
		{"dv-succeeded", imported, "True Ready: DataSource is ready to be consumed", nil},
		{"dv-importing", fromPVC(ns, "importing"), "False ImportInProgress: Import DataVolume phase ImportInProgress", nil},
		{"dv-no-phase", fromPVC("", "fresh"), "False Pending: Import DataVolume phase Pending", nil},
		{"pvc-only", fromPVC("", "plain"), "True Ready: DataSource is ready to be consumed", nil},
		{"pvc-other-namespace", fromPVC("elsewhere", "far"), "True Ready: DataSource is ready to be consumed", nil},
		{"missing", fromPVC("", "nothing"), "False NotFound: PVC not found", nil},
		{"no-source", cdiv1.DataSourceSource{}, "False NoSource: No source PVC set", nil},
		{"snapshot", cdiv1.DataSourceSource{Snapshot: &cdiv1.DataVolumeSourceSnapshot{Name: "snap"}},
			"False SnapshotNotSupported: spec.source.snapshot: converge's hostpath CSI driver has no volume snapshots; expected spec.source.pvc", nil},
		{"ref", fromDataSource("dv-succeeded"), "True Ready: DataSource is ready to be consumed", &imported},
		{"ref-importing", fromDataSource("dv-importing"), "False ImportInProgress: Import DataVolume phase ImportInProgress", nil},
		{"ref-missing", fromDataSource("nowhere"), `False NotFound: DataSource.cdi.kubevirt.io "nowhere" not found`, nil},
		{"ref-self", fromDataSource("ref-self"), "False SelfReference: DataSource cannot self-reference", nil},
		{"ref-other-namespace", cdiv1.DataSourceSource{DataSource: &cdiv1.DataSourceRefSourceDataSource{Namespace: "elsewhere", Name: "x"}},
			"False CrossNamespaceReference: DataSource cannot reference a DataSource in another namespace", nil},
		{"ref-chain", fromDataSource("ref"), "False MaxReferenceDepthReached: DataSource reference chain exceeds maximum depth of 1", nil},
	}
	for _, tc := range cases {
		must(t, c.Create(ctx, &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name}, Spec: cdiv1.DataSourceSpec{Source: tc.source}}))
	}
	controlplane.RunManagerForTest(t, env, scheme, func(mgr ctrl.Manager) error {
		o := datasource.DefaultOptions()
		o.CRDPoll, o.SkipNameValidation = 100*time.Millisecond, true
		return datasource.Setup(mgr, o)
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := waitReady(t, c, tc.name, tc.want)
			want := cdiv1.DataSourceSource{}
			switch {
			case tc.resolved != nil:
				want = *tc.resolved
			case strings.HasPrefix(tc.want, "True"):
				want = ds.Spec.Source
			}
			if !reflect.DeepEqual(ds.Status.Source, want) {
				t.Errorf("status.source %+v, want %+v (the resolved source while Ready, else empty)", ds.Status.Source, want)
			}
		})
	}

	// The import finishes: the DataSource naming it, and the one
	// referencing that, become Ready.
	dv := &cdiv1.DataVolume{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "importing"}, dv))
	dv.Status.Phase = cdiv1.Succeeded
	must(t, c.Status().Update(ctx, dv))
	for _, name := range []string{"dv-importing", "ref-importing"} {
		ds := waitReady(t, c, name, "True Ready: DataSource is ready to be consumed")
		cond := ds.Status.Conditions[0]
		if cond.LastTransitionTime.IsZero() || cond.LastHeartbeatTime.Before(&cond.LastTransitionTime) {
			t.Errorf("DataSource %s: lastTransitionTime %v, lastHeartbeatTime %v", name, cond.LastTransitionTime, cond.LastHeartbeatTime)
		}
	}
	// The PVC appears: the missing source becomes Ready.
	must(t, c.Create(ctx, pvc("nothing")))
	waitReady(t, c, "missing", "True Ready: DataSource is ready to be consumed")
	// The DataSource is repointed: status.source follows the spec.
	ds := &cdiv1.DataSource{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "no-source"}, ds))
	ds.Spec.Source = fromPVC("", "plain")
	must(t, c.Update(ctx, ds))
	ds = waitReady(t, c, "no-source", "True Ready: DataSource is ready to be consumed")
	if ds.Status.Source.PVC == nil || ds.Status.Source.PVC.Name != "plain" {
		t.Errorf("status.source %+v after repointing, want the PVC plain", ds.Status.Source)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
