package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestHostpathExpansion: on the example's Sync, Ready through the native
// operators, a Block PVC of the pool's StorageClass (allowVolumeExpansion,
// components/hpp) used by a running pod is expanded from 64Mi to 128Mi by
// raising spec.resources.requests.storage: the node's resizer grows the
// volume (nodeplane/csi/resizer), the PV's spec.capacity and the PVC's
// status.capacity become 128Mi, and the pod, still in its first run,
// sees its device grow to 128 MiB (volumewriter prints the device's size
// whenever it changes). A Filesystem volume of this driver is a directory
// without quota, whose size a pod cannot see, so the pod's view is
// checked on a Block volume.
func TestHostpathExpansion(t *testing.T) {
	e, _, _, _ := syncExample(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	waitSyncReady(t, ctx, e)
	importVolumeWriter(t, ctx, e)
	cs := e.Clientset

	const name, device = "grow", "/dev/xvda"
	class, block := storageClass, corev1.PersistentVolumeBlock
	small, large := resource.MustParse("64Mi"), resource.MustParse("128Mi")
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: volumeNS, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			VolumeMode:       &block,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: small}},
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: volumeNS, Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "writer", Image: volumeImage, ImagePullPolicy: corev1.PullNever,
				Env:           []corev1.EnvVar{{Name: "DEVICE", Value: device}, {Name: "CONTENT", Value: randomHex(t)}},
				VolumeDevices: []corev1.VolumeDevice{{Name: "data", DevicePath: device}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}},
		},
	}
	for _, o := range []client.Object{pvc, pod} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 3*time.Minute, "the pod "+name+" is Ready", func() (bool, string) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		return podReady(pod), describePod(pod)
	})
	sizeLine := func(q resource.Quantity) string { return fmt.Sprintf("volumewriter: size %s %d\n", device, q.Value()) }
	waitLog := func(want string) {
		eventually(t, 2*time.Minute, "the pod's log has "+strings.TrimSpace(want), func() (bool, string) {
			l, err := podLog(ctx, cs, volumeNS, name, "writer", false)
			if err != nil {
				return false, err.Error()
			}
			return strings.Contains(l, want), l
		})
	}
	waitLog(sizeLine(small))

	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	if got := pvc.Status.Capacity[corev1.ResourceStorage]; got.Cmp(small) != 0 {
		t.Fatalf("PVC %s: status.capacity storage %s before the expansion, want %s", name, got.String(), small.String())
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"resources":{"requests":{"storage":"`+large.String()+`"}}}}`))
	if err := e.Client.Patch(ctx, pvc, patch); err != nil {
		t.Fatalf("raising the PVC's request to %s: %v", large.String(), err)
	}
	start := time.Now()
	eventually(t, 2*time.Minute, "the PVC's status.capacity and its PV's spec.capacity are "+large.String(), func() (bool, string) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, err.Error()
		}
		pv := &corev1.PersistentVolume{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
			return false, err.Error()
		}
		got, gotPV := pvc.Status.Capacity[corev1.ResourceStorage], pv.Spec.Capacity[corev1.ResourceStorage]
		return got.Cmp(large) == 0 && gotPV.Cmp(large) == 0,
			fmt.Sprintf("PVC status.capacity %s, conditions %+v, allocatedResourceStatuses %v; PV spec.capacity %s", got.String(), pvc.Status.Conditions, pvc.Status.AllocatedResourceStatuses, gotPV.String())
	})
	t.Logf("PVC %s at %s %s after the request was raised", name, large.String(), time.Since(start).Round(time.Millisecond))
	waitLog(sizeLine(large))
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.RestartCount != 0 {
			t.Errorf("container %s restarted %d times: the device must grow under the running pod", c.Name, c.RestartCount)
		}
	}

	pvName := pvc.Spec.VolumeName
	for _, o := range []client.Object{pod, pvc} {
		if err := e.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, "the PV "+pvName+" is deleted", func() (bool, string) {
		err := e.Client.Get(ctx, client.ObjectKey{Name: pvName}, &corev1.PersistentVolume{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
}
