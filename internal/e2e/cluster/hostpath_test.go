package cluster_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
)

// The example's HostPathProvisioner: its pool, and what converge derives
// for it (components/hpp).
const (
	poolPath      = "/var/hpvolumes"     // testdata/example/hostpathprovisioner.yaml, pool local
	storageClass  = "hostpath-csi-local" // hostpath-csi-<pool>
	csiDriverName = "kubevirt.io.hostpath-provisioner"
	volumeImage   = "localhost/converge/volumewriter:1"
	volumeNS      = "hostpath-e2e"
)

// TestHostpathVolume: on the example's Sync, Ready through the native
// operators, the hostpath CSI driver the HostPathProvisioner operator runs
// is registered with the kubelet (the CSINode lists it), and a pod
// mounting a PVC of the pool's StorageClass runs: the PVC is provisioned
// and bound by the driver, the kubelet mounts the volume through CSI, the
// pod writes a file there and turns Ready, and the file is in the pool on
// the host; deleting the pod and the PVC deletes the PV and its
// directory.
func TestHostpathVolume(t *testing.T) {
	e, _, _, _ := syncExample(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	waitSyncReady(t, ctx, e)

	eventually(t, 2*time.Minute, "the kubelet registered "+csiDriverName, func() (bool, string) {
		n := &storagev1.CSINode{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: e.Cluster.NodeName}, n); err != nil {
			return false, err.Error()
		}
		for _, d := range n.Spec.Drivers {
			if d.Name == csiDriverName {
				return true, ""
			}
		}
		return false, "CSINode drivers: " + driverNames(n)
	})

	archive := filepath.Join(t.TempDir(), "volumewriter.tar")
	if err := localcluster.BuildGoImage(ctx, "./internal/e2e/cluster/testdata/volumewriter", volumeImage, archive); err != nil {
		t.Fatal(err)
	}
	if err := e.Cluster.ImportImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: volumeNS}}); err != nil {
		t.Fatal(err)
	}
	sc := storageClass
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: volumeNS, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &sc,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	}
	content := randomHex(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: volumeNS, Name: "writer"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "writer", Image: volumeImage, ImagePullPolicy: corev1.PullNever,
				Env:          []corev1.EnvVar{{Name: "FILE", Value: "/data/hello"}, {Name: "CONTENT", Value: content}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	}
	for _, o := range []client.Object{pvc, pod} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	eventually(t, 3*time.Minute, "the writer pod is Ready", func() (bool, string) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		return podReady(pod), describePod(pod)
	})
	t.Logf("pod with a hostpath-csi volume: Ready %s after its creation", time.Since(start).Round(time.Millisecond))

	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatalf("PV of the PVC (%q): %v", pvc.Spec.VolumeName, err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != csiDriverName {
		t.Errorf("PV %s: source %+v, want CSI driver %s", pv.Name, pv.Spec.PersistentVolumeSource, csiDriverName)
	}
	target := filepath.Join(localcluster.DefaultKubeletRootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~csi", pv.Name, "mount")
	if !mounted(t, target) {
		t.Errorf("%s is not a mount point: the kubelet did not publish the volume through CSI", target)
	}
	var found []string
	_ = filepath.WalkDir(poolPath, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "hello" {
			if b, _ := os.ReadFile(p); string(b) == content {
				found = append(found, p)
			}
		}
		return nil
	})
	if len(found) != 1 {
		t.Fatalf("the pod's file with %q: found at %v under %s, want once", content, found, poolPath)
	}

	for _, o := range []client.Object{pod, pvc} {
		if err := e.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, "the PV and its directory are deleted", func() (bool, string) {
		err := e.Client.Get(ctx, client.ObjectKey{Name: pv.Name}, &corev1.PersistentVolume{})
		if !apierrors.IsNotFound(err) {
			return false, "PV " + pv.Name + " still exists"
		}
		if _, err := os.Stat(found[0]); !errors.Is(err, os.ErrNotExist) {
			return false, found[0] + " still exists"
		}
		return true, ""
	})
}

// driverNames lists the drivers of a CSINode.
func driverNames(n *storagev1.CSINode) string {
	var s []string
	for _, d := range n.Spec.Drivers {
		s = append(s, d.Name)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// mounted tells whether path is a mount point (in this process's mount
// namespace, the host's).
func mounted(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == path {
			return true
		}
	}
	return false
}

// randomHex gives 16 random bytes in hex.
func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
