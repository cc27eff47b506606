package cdi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

// TestChain runs the whole storage chain with no stand-in (newChain: a
// real kube-apiserver and etcd; kube-controller-manager; the DataVolume
// controller; node-a's hostpath CSI driver with its PVC provisioner and
// its cdi-importer agent through importcontroller.Run) and a qcow2 image made
// with qemu-img served on loopback.
//
// A DataVolume of StorageClass hostpath-csi (WaitForFirstConsumer, pool
// "local") goes: DataVolume controller creates the PVC and selects node-a
// → the provisioner creates the volume in the pool and its PV → KCM binds
// the PVC → the agent imports → Succeeded, and <pool>/<pv>/data/disk.img
// equals the raw image byte for byte. Deleting the DataVolume then removes
// the PVC (garbage collector), the PV (reclaim Delete, by the provisioner)
// and the volume directory. Each step's latency is logged.
func TestChain(t *testing.T) {
	ch := newChain(t, nil)
	ctx, c, pool := context.Background(), ch.c, ch.pool

	// A 16 MiB raw image of random stripes and holes, served as qcow2; the
	// PVC has the same size, so the imported disk must equal it exactly.
	const size = 16 << 20
	raw, img, qPath := stripedImage(t, size, 7)
	qcow2, err := os.ReadFile(qPath)
	must(t, err)
	srv := httptest.NewServer(http.FileServer(http.Dir(img)))
	t.Cleanup(srv.Close)

	// Import.
	key := types.NamespacedName{Namespace: ns, Name: "fedora"}
	steps := newStepper(t)
	must(t, c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
		"metadata": map[string]any{"name": key.Name, "namespace": key.Namespace},
		"spec": map[string]any{
			"source":  map[string]any{"http": map[string]any{"url": srv.URL + "/disk.qcow2", "checksum": sha(qcow2)}},
			"storage": map[string]any{"storageClassName": scName, "resources": map[string]any{"requests": map[string]any{"storage": "16Mi"}}},
		},
	}}))
	steps.done("DataVolume created")
	pvc := &corev1.PersistentVolumeClaim{}
	getPVC := func() bool { return c.Get(ctx, key, pvc) == nil }
	steps.wait("PVC created by the DataVolume controller", getPVC)
	steps.wait("node selected (volume.kubernetes.io/selected-node)", func() bool {
		return getPVC() && pvc.Annotations[dvapi.AnnSelectedNode] != ""
	})
	if got := pvc.Annotations[dvapi.AnnSelectedNode]; got != node {
		t.Fatalf("PVC %s: selected node %q, want %s", key, got, node)
	}
	pvName := "pvc-" + string(pvc.UID) // the provisioner library's PV name
	pv := &corev1.PersistentVolume{}
	steps.wait("PV "+pvName+" created by the provisioner", func() bool { return c.Get(ctx, types.NamespacedName{Name: pvName}, pv) == nil })
	steps.wait("PVC Bound by kube-controller-manager", func() bool {
		return getPVC() && pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName == pvName
	})
	dv := &cdiv1.DataVolume{}
	steps.wait("DataVolume Succeeded (import by the cdi-importer)", func() bool {
		return c.Get(ctx, key, dv) == nil && (dv.Status.Phase == cdiv1.Succeeded || dv.Status.Phase == cdiv1.Failed)
	})
	if dv.Status.Phase != cdiv1.Succeeded {
		t.Fatalf("DataVolume %s: phase %s, want Succeeded; conditions %+v", key, dv.Status.Phase, dv.Status.Conditions)
	}
	wantCond(t, dv, cdiv1.DataVolumeReady, corev1.ConditionTrue, "")
	wantCond(t, dv, cdiv1.DataVolumeBound, corev1.ConditionTrue, dvapi.ReasonBound)
	wantEvent(t, waitEvents(t, c, key.Name, importcontroller.EventImportSucceeded, 1), corev1.EventTypeNormal, importcontroller.EventImportSucceeded, "Successfully imported into PVC "+key.Name)
	if pv.Spec.CSI == nil || pv.Spec.CSI.VolumeHandle != pvName || pv.Spec.CSI.VolumeAttributes[hostpath.ParameterStoragePool] != poolDir {
		t.Errorf("PV %s: CSI source %+v, want handle %s in pool %s", pvName, pv.Spec.CSI, pvName, poolDir)
	}
	disk := filepath.Join(pool.Path, pvName, "data", importcontroller.DiskImage)
	got, err := os.ReadFile(disk)
	must(t, err)
	if !bytes.Equal(got, raw) {
		t.Fatalf("%s: %d bytes, sha %s; want the %d-byte raw image, sha %s", disk, len(got), sha(got), len(raw), sha(raw))
	}
	if a := allocated(t, disk); a >= size {
		t.Errorf("%s: %d bytes allocated for %d, want sparse (3/4 of the image is holes)", disk, a, size)
	} else {
		t.Logf("%s equals the raw image (%d bytes, %d allocated); qcow2 was %d bytes", disk, size, a, len(qcow2))
	}
	steps.total("import chain")

	// Delete the DataVolume: everything it made goes.
	steps = newStepper(t)
	must(t, c.Delete(ctx, dv))
	steps.wait("DataVolume gone", func() bool { return apierrors.IsNotFound(c.Get(ctx, key, &cdiv1.DataVolume{})) })
	steps.wait("PVC gone (garbage collector, PVC protection)", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, key, &corev1.PersistentVolumeClaim{}))
	})
	steps.wait("PV gone (reclaim Delete by the provisioner)", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, types.NamespacedName{Name: pvName}, &corev1.PersistentVolume{}))
	})
	if _, err := os.Stat(filepath.Join(pool.Path, pvName)); !os.IsNotExist(err) {
		t.Errorf("volume directory %s still there after its PV is gone (stat: %v)", filepath.Join(pool.Path, pvName), err)
	}
	left, err := os.ReadDir(pool.Path)
	must(t, err)
	if len(left) != 0 {
		t.Errorf("pool %s not empty after the DataVolume is deleted: %v", pool.Path, left)
	}
	steps.total("deletion chain")
}
