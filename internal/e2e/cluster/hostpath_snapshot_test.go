package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/e2e/cluster"
)

// snapshotClass is the driver's VolumeSnapshotClass (components/hpp
// VolumeSnapshotClassName), the driver's default class.
const snapshotClass = "hostpath-csi"

// TestHostpathSnapshot: on the example's Sync, Ready through the native
// operators, a pod writes a file to a hostpath PVC; a VolumeSnapshot of
// the PVC naming no class gets the driver's default class and becomes
// readyToUse through the deployed controllers alone (converge-controller's
// snapshot-controller role creates the VolumeSnapshotContent labelled for
// the volume's node, that node's csi-snapshotter in converge-node
// hostpath-csi takes the snapshot through the driver's socket), and the
// snapshot is on disk in the pool's .snapshots with the file; a second pod
// overwrites the file in the source volume; a new PVC with dataSource
// VolumeSnapshot is provisioned from the snapshot and a pod reading it
// finds the old content (volumewriter EXPECT_FILE) and turns Ready;
// deleting the VolumeSnapshot deletes its content (deletionPolicy Delete)
// and the snapshot's directory.
func TestHostpathSnapshot(t *testing.T) {
	e, _, _, _ := syncExample(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	waitSyncReady(t, ctx, e)
	importVolumeWriter(t, ctx, e)
	snaps, err := snapclientset.NewForConfig(e.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}

	src := startWriter(t, ctx, e, "snap-source", storageClass)
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: volumeNS, Name: "snap"},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &src.pvc.Name}},
	}
	if vs, err = snaps.SnapshotV1().VolumeSnapshots(volumeNS).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(t, 3*time.Minute, "the VolumeSnapshot is readyToUse", func() (bool, string) {
		if vs, err = snaps.SnapshotV1().VolumeSnapshots(volumeNS).Get(ctx, vs.Name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse, fmt.Sprintf("status %+v", vs.Status)
	})
	t.Logf("VolumeSnapshot readyToUse %s after its creation", time.Since(start).Round(time.Millisecond))
	if vs.Spec.VolumeSnapshotClassName == nil || *vs.Spec.VolumeSnapshotClassName != snapshotClass {
		t.Errorf("VolumeSnapshot class %v, want the driver's default %s", vs.Spec.VolumeSnapshotClassName, snapshotClass)
	}
	content, err := snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, *vs.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := content.Labels["snapshot.storage.kubernetes.io/managed-by"]; got != e.Cluster.NodeName {
		t.Errorf("VolumeSnapshotContent %s: managed-by %q, want the volume's node %s", content.Name, got, e.Cluster.NodeName)
	}
	if content.Status == nil || content.Status.SnapshotHandle == nil {
		t.Fatalf("VolumeSnapshotContent %s: no snapshot handle: %+v", content.Name, content.Status)
	}
	snapDir := filepath.Join(poolPath, ".snapshots", *content.Status.SnapshotHandle)
	if found := findContent(snapDir, src.content); len(found) != 1 {
		t.Fatalf("the snapshot's copy of the file with %q: found at %v under %s, want once", src.content, found, snapDir)
	}

	// The source changes after the snapshot.
	if err := e.Client.Delete(ctx, src.pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the first writer pod is gone", func() (bool, string) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(src.pod), &corev1.Pod{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	changed := randomHex(t)
	src.pod = volumePod("snap-source", src.pvc.Name, []corev1.EnvVar{{Name: "FILE", Value: "/data/hello"}, {Name: "CONTENT", Value: changed}})
	waitPodReady(t, ctx, e, src.pod)
	if found := findContent(poolPath, changed); len(found) != 1 {
		t.Fatalf("the changed file with %q: found at %v under %s, want once (the source volume)", changed, found, poolPath)
	}

	// A PVC restored from the snapshot holds the old content.
	restored := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: volumeNS, Name: "snap-restored"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: src.pvc.Spec.StorageClassName,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
			DataSource:       &corev1.TypedLocalObjectReference{APIGroup: &snapv1.SchemeGroupVersion.Group, Kind: "VolumeSnapshot", Name: vs.Name},
		},
	}
	if err := e.Client.Create(ctx, restored); err != nil {
		t.Fatal(err)
	}
	reader := volumePod("snap-reader", restored.Name, []corev1.EnvVar{
		{Name: "EXPECT_FILE", Value: "/data/hello"}, {Name: "EXPECT", Value: src.content},
		{Name: "FILE", Value: "/data/read"}, {Name: "CONTENT", Value: "read"}})
	waitPodReady(t, ctx, e, reader)
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(restored), restored); err != nil {
		t.Fatal(err)
	}
	if restored.Status.Phase != corev1.ClaimBound {
		t.Errorf("restored PVC %s: phase %s, want Bound", restored.Name, restored.Status.Phase)
	}

	// Deleting the VolumeSnapshot deletes its content and the snapshot.
	if err := snaps.SnapshotV1().VolumeSnapshots(volumeNS).Delete(ctx, vs.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the VolumeSnapshotContent "+content.Name+" and "+snapDir+" are deleted", func() (bool, string) {
		if _, err := snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, content.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("content: %v", err)
		}
		if _, err := os.Stat(snapDir); !errors.Is(err, os.ErrNotExist) {
			return false, snapDir + " still exists"
		}
		return true, ""
	})

	for _, o := range []client.Object{reader, restored} {
		if err := e.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	src.stop(t, ctx, e, poolPath)
}

// volumePod gives, in volumeNS, a volumewriter pod name with env,
// mounting the PVC claim at /data, and gives it.
func volumePod(name, claim string, env []corev1.EnvVar) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: volumeNS, Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "writer", Image: volumeImage, ImagePullPolicy: corev1.PullNever, Env: env,
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
}

// waitPodReady creates pod and waits until it is Ready.
func waitPodReady(t *testing.T, ctx context.Context, e *cluster.Env, pod *corev1.Pod) {
	t.Helper()
	if err := e.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the pod "+pod.Name+" is Ready", func() (bool, string) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		return podReady(pod), describePod(pod)
	})
}
