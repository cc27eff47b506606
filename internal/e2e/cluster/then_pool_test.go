package cluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/e2e/cluster"
)

// The pool TestPVCPool adds to the example's HostPathProvisioner: backed,
// on each node, by a PVC of the example's own local pool.
const (
	pvcPoolName = "fast"
	pvcPoolPath = "/var/converge-e2e-fast"
	hppFile     = configPath + "/hostpathprovisioner.yaml"
)

// TestPVCPool: a storage pool with a pvcTemplate, committed to the
// example's HostPathProvisioner, gets a storage pool worker on the node
// (converge's HostPathProvisioner operator, as upstream's storagepool.go):
// a PVC from the template, here of the local pool's StorageClass, bound
// and provisioned by the hostpath CSI driver, and a Deployment whose
// mounter bind-mounts it at <path>/csi on the node. The driver then serves
// the new pool from there: a pod's volume of hostpath-csi-fast lands
// inside the local pool's PVC. The Sync is Ready meanwhile. Removing the
// pool removes the worker, the mount and the StorageClass, and keeps the
// pool's PVC, as upstream.
func TestPVCPool(t *testing.T) {
	e, repo, _, _ := syncExample(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	waitSyncReady(t, ctx, e)
	t.Cleanup(func() { _ = os.RemoveAll(pvcPoolPath) })

	worker := "hpp-pool-" + pvcPoolName + "-" + e.Cluster.NodeName
	poolYAML := "      path: /var/hpvolumes\n" +
		"    - name: " + pvcPoolName + "\n" +
		"      path: " + pvcPoolPath + "\n" +
		"      pvcTemplate:\n" +
		"        storageClassName: " + storageClass + "\n" +
		"        accessModes: [ReadWriteOnce]\n" +
		"        resources: {requests: {storage: 1Gi}}\n"
	repo.Replace(t, "a pool on a PVC", hppFile, "      path: /var/hpvolumes\n", poolYAML)
	if r := e.Converge(ctx, "reconcile", "sync", syncName, "-n", controllerNS); r.Err != nil {
		t.Fatal(r)
	}
	removed := false
	defer func() {
		if !removed {
			repo.Replace(t, "no pool on a PVC", hppFile, poolYAML, "      path: /var/hpvolumes\n")
			e.Converge(ctx, "reconcile", "sync", syncName, "-n", controllerNS)
		}
	}()

	pvc := &corev1.PersistentVolumeClaim{}
	eventually(t, 3*time.Minute, "the pool worker runs with its PVC bound", func() (bool, string) {
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: worker}, pvc); err != nil {
			return false, "PVC: " + err.Error()
		}
		d := &appsv1.Deployment{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: worker}, d); err != nil {
			return false, "Deployment: " + err.Error()
		}
		return pvc.Status.Phase == corev1.ClaimBound && d.Status.ReadyReplicas == 1,
			fmt.Sprintf("PVC %s, Deployment %d ready", pvc.Status.Phase, d.Status.ReadyReplicas)
	})
	eventually(t, time.Minute, pvcPoolPath+"/csi is a mount on the node", func() (bool, string) {
		return mounted(t, pvcPoolPath+"/csi"), "not mounted"
	})
	waitSyncReady(t, ctx, e)

	importVolumeWriter(t, ctx, e)
	defer func() {
		if t.Failed() {
			t.Logf("after a failure:\n%s", storageState(ctx, e))
		}
	}()
	w := startWriter(t, ctx, e, "writer-fast", "hostpath-csi-"+pvcPoolName)
	// The volume is in the fast pool, which is the worker's PVC, itself a
	// volume of the local pool: the file is under both.
	for _, root := range []string{pvcPoolPath + "/csi", poolPath} {
		if found := findContent(root, w.content); len(found) != 1 {
			t.Errorf("the pod's file: found at %v under %s, want once", found, root)
		}
	}
	w.stop(t, ctx, e, pvcPoolPath+"/csi", poolPath)

	repo.Replace(t, "no pool on a PVC", hppFile, poolYAML, "      path: /var/hpvolumes\n")
	removed = true
	if r := e.Converge(ctx, "reconcile", "sync", syncName, "-n", controllerNS); r.Err != nil {
		t.Fatal(r)
	}
	eventually(t, 3*time.Minute, "the worker, its mount and the StorageClass are gone", func() (bool, string) {
		var left []string
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: worker}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			left = append(left, "Deployment "+worker)
		}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: "hostpath-csi-" + pvcPoolName}, &storagev1.StorageClass{}); !apierrors.IsNotFound(err) {
			left = append(left, "StorageClass hostpath-csi-"+pvcPoolName)
		}
		if mounted(t, pvcPoolPath+"/csi") {
			left = append(left, "the mount "+pvcPoolPath+"/csi")
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil || pvc.DeletionTimestamp != nil {
		t.Errorf("the pool's PVC %s after the pool went: %v, want it kept", worker, err)
	}
	if err := e.Client.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the pool's PVC deleted by hand", func() (bool, string) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(pvc), &corev1.PersistentVolumeClaim{})
		return apierrors.IsNotFound(err), "still there"
	})
	waitSyncReady(t, ctx, e)
}

// storageState describes, for a failure, the PVCs and events of volumeNS
// and hcNamespace and the end of the hostpath CSI driver's log.
func storageState(ctx context.Context, e *cluster.Env) string {
	var b strings.Builder
	for _, ns := range []string{volumeNS, hcNamespace} {
		pvcs, err := e.Clientset.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, "PVCs of %s: %v\n", ns, err)
		}
		for _, p := range pvcs.Items {
			fmt.Fprintf(&b, "PVC %s/%s %s volume %q annotations %v\n", ns, p.Name, p.Status.Phase, p.Spec.VolumeName, p.Annotations)
		}
		evs, err := e.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, ev := range evs.Items {
				fmt.Fprintf(&b, "event %s %s/%s %s: %s\n", ns, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
			}
		}
	}
	pods, _ := podsOf(ctx, e.Clientset, hcNamespace, "k8s-app=hostpath-provisioner-csi")
	for _, p := range pods {
		log, err := podLog(ctx, e.Clientset, hcNamespace, p.Name, "hostpath-csi", false)
		if err != nil {
			log = err.Error()
		}
		if len(log) > 3000 {
			log = log[len(log)-3000:]
		}
		fmt.Fprintf(&b, "%s log:\n%s\n", p.Name, log)
	}
	return b.String()
}
