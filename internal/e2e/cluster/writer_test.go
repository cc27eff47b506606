package cluster_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/e2e/cluster"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
)

// volumeWriter is the image of testdata/volumewriter, built and imported
// once per test binary with the namespace its pods run in.
var volumeWriter struct {
	once sync.Once
	err  error
}

// importVolumeWriter builds testdata/volumewriter into volumeImage,
// imports it into the cluster and creates volumeNS, once.
func importVolumeWriter(t *testing.T, ctx context.Context, e *cluster.Env) {
	t.Helper()
	volumeWriter.once.Do(func() {
		archive := filepath.Join(os.TempDir(), "converge-e2e-volumewriter.tar")
		defer os.Remove(archive)
		if volumeWriter.err = localcluster.BuildGoImage(ctx, "./internal/e2e/cluster/testdata/volumewriter", volumeImage, archive); volumeWriter.err != nil {
			return
		}
		if volumeWriter.err = e.Cluster.ImportImage(ctx, archive); volumeWriter.err != nil {
			return
		}
		volumeWriter.err = e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: volumeNS}})
	})
	if volumeWriter.err != nil {
		t.Fatal(volumeWriter.err)
	}
}

// writer is a pod of volumeImage that wrote content to /data/hello on its
// volume, a PVC of a hostpath-csi StorageClass, and turned Ready.
type writer struct {
	pod     *corev1.Pod
	pvc     *corev1.PersistentVolumeClaim
	pv      *corev1.PersistentVolume
	content string
	// Ready is how long the pod took from its creation to Ready.
	Ready time.Duration
}

// startWriter creates, in volumeNS, a PVC name of class (64Mi) and a pod
// name writing random content to it, and waits until the pod is Ready
// and the PVC bound (importVolumeWriter first).
func startWriter(t *testing.T, ctx context.Context, e *cluster.Env, name, class string) *writer {
	t.Helper()
	w := &writer{content: randomHex(t)}
	w.pvc = &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: volumeNS, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	}
	w.pod = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: volumeNS, Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "writer", Image: volumeImage, ImagePullPolicy: corev1.PullNever,
				Env:          []corev1.EnvVar{{Name: "FILE", Value: "/data/hello"}, {Name: "CONTENT", Value: w.content}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}},
		},
	}
	for _, o := range []client.Object{w.pvc, w.pod} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	eventually(t, 3*time.Minute, "the writer pod "+name+" is Ready", func() (bool, string) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(w.pod), w.pod); err != nil {
			return false, err.Error()
		}
		return podReady(w.pod), describePod(w.pod)
	})
	w.Ready = time.Since(start)
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(w.pvc), w.pvc); err != nil {
		t.Fatal(err)
	}
	w.pv = &corev1.PersistentVolume{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: w.pvc.Spec.VolumeName}, w.pv); err != nil {
		t.Fatalf("PV of the PVC %s (%q): %v", name, w.pvc.Spec.VolumeName, err)
	}
	return w
}

// stop deletes the writer's pod and PVC and waits until the PV and the
// files holding its content under roots are gone.
func (w *writer) stop(t *testing.T, ctx context.Context, e *cluster.Env, roots ...string) {
	t.Helper()
	var files []string
	for _, r := range roots {
		files = append(files, findContent(r, w.content)...)
	}
	for _, o := range []client.Object{w.pod, w.pvc} {
		if err := e.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, "the PV "+w.pv.Name+" and its files are deleted", func() (bool, string) {
		if err := e.Client.Get(ctx, client.ObjectKey{Name: w.pv.Name}, &corev1.PersistentVolume{}); !apierrors.IsNotFound(err) {
			return false, "PV " + w.pv.Name + " still exists"
		}
		for _, f := range files {
			if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
				return false, f + " still exists"
			}
		}
		return true, ""
	})
}

// findContent gives the files named hello below root holding content.
func findContent(root, content string) []string {
	var found []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "hello" {
			if b, _ := os.ReadFile(p); string(b) == content {
				found = append(found, p)
			}
		}
		return nil
	})
	return found
}
