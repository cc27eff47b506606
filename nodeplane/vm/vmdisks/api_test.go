package vmdisks_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
	"github.com/converge-dev/converge/nodeplane/vm/vmdisks"
)

const node = "node-a"

// hostpathVolumes creates volumes with the real hostpath CSI driver
// (in-process) in a pool of its own: id → block.
func hostpathVolumes(t *testing.T, vols map[string]bool) hostpath.Pool {
	t.Helper()
	d, pool := storagetest.StartDriver(t, node, "local")
	for id, block := range vols {
		v := storagetest.Volume{ID: id, Size: resource.MustParse("1Mi"), Pool: pool, Node: node, Block: block}
		if err := v.Create(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	return pool
}

// bindClaim creates PVC ns/claim bound (as kube-controller-manager binds)
// to a PV of the hostpath driver for volume handle on onNode, with owner
// as the PVC's controller when set.
func bindClaim(t *testing.T, c client.Client, claim, handle, onNode string, block bool, owner *metav1.OwnerReference) {
	t.Helper()
	ctx := context.Background()
	mode := corev1.PersistentVolumeFilesystem
	if block {
		mode = corev1.PersistentVolumeBlock
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: claim}}
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	pvc.Spec.VolumeMode = &mode
	pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: mustQuantity("1Mi")}
	if owner != nil {
		pvc.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if handle == "" {
		return // left Pending
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + claim}}
	pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: mustQuantity("1Mi")}
	pv.Spec.AccessModes = pvc.Spec.AccessModes
	pv.Spec.VolumeMode = &mode
	pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: hostpath.DefaultDriverName, VolumeHandle: handle}
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostpath.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{onNode}}},
	}}}}
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: claim, UID: pvc.UID}
	if err := c.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	pvc.Spec.VolumeName = pv.Name
	if err := c.Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	if err := c.Status().Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
}

// TestPVCResolver resolves claims against a real API server and volumes
// of the real hostpath driver: a bound claim gives the volume's disk.img
// (Filesystem) or its block file; a missing or pending claim, and a
// claim whose DataVolume is still importing, are not ready
// (domain.ErrVolumeNotReady) until they are; a claim on another node's
// volume is an error naming the claim.
func TestPVCResolver(t *testing.T) {
	controlplane.RequireForTest(t)
	_, c, _ := controlplane.StartEnvForTest(t, cdiv1.AddToScheme)
	crdtest.Install(t, c, "datavolumes")
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}); err != nil {
		t.Fatal(err)
	}
	pool := hostpathVolumes(t, map[string]bool{"vol-fs": false, "vol-blk": true, "vol-dv": false})
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dv"}}
	dv.Spec.Source = &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}
	if err := c.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	dv.Status.Phase, dv.Status.Progress = cdiv1.ImportInProgress, "42.0%"
	if err := c.Status().Update(ctx, dv); err != nil {
		t.Fatal(err)
	}
	yes := true
	bindClaim(t, c, "fs", "vol-fs", node, false, nil)
	bindClaim(t, c, "blk", "vol-blk", node, true, nil)
	bindClaim(t, c, "pending", "", node, false, nil)
	bindClaim(t, c, "elsewhere", "vol-fs", "node-z", false, nil)
	bindClaim(t, c, "dv", "vol-dv", node, false, &metav1.OwnerReference{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume", Name: "dv", UID: dv.UID, Controller: &yes})

	opts := importcontroller.DefaultOptions()
	opts.NodeName, opts.Pools = node, []hostpath.Pool{pool}
	r := vmdisks.PVCResolver{Client: c, Volumes: opts, Timeout: 10 * time.Second}
	for _, tc := range []struct {
		claim    string
		want     domain.DiskSource
		notReady bool
		wantErr  string
	}{
		{claim: "fs", want: domain.DiskSource{Path: filepath.Join(pool.Path, "vol-fs", "data", "disk.img"), Format: "raw"}},
		{claim: "blk", want: domain.DiskSource{Path: filepath.Join(pool.Path, "vol-blk", "disk.img"), Block: true, Format: "raw"}},
		{claim: "missing", notReady: true, wantErr: "PersistentVolumeClaim ns/missing: not found: volume not ready"},
		{claim: "pending", notReady: true, wantErr: "PersistentVolumeClaim ns/pending: not bound yet (phase Pending): volume not ready"},
		{claim: "dv", notReady: true, wantErr: "PersistentVolumeClaim ns/dv: DataVolume dv is ImportInProgress (42.0%): volume not ready"},
		{claim: "elsewhere", wantErr: "PersistentVolumeClaim ns/elsewhere: PersistentVolume pv-elsewhere is not a volume of CSI driver " + hostpath.DefaultDriverName + " on node node-a: the VMI runs on the node of its volumes"},
	} {
		t.Run(tc.claim, func(t *testing.T) {
			got, err := r.Resolve("ns", tc.claim)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Resolve: %v, want %s", err, tc.wantErr)
				}
				if errors.Is(err, domain.ErrVolumeNotReady) != tc.notReady {
					t.Errorf("errors.Is(ErrVolumeNotReady) = %v, want %v", !tc.notReady, tc.notReady)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resolve = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	dv.Status.Phase, dv.Status.Progress = cdiv1.Succeeded, "100.0%"
	if err := c.Status().Update(ctx, dv); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Resolve("ns", "dv"); err != nil || got.Path != filepath.Join(pool.Path, "vol-dv", "data", "disk.img") {
		t.Errorf("DataVolume Succeeded: Resolve = %+v, %v", got, err)
	}
}

// TestAPIObjects reads Secrets and ConfigMaps (data and binaryData) from
// a real API server; a missing object wraps vmdisks.ErrNotFound.
func TestAPIObjects(t *testing.T) {
	controlplane.RequireForTest(t)
	_, c, _ := controlplane.StartEnvForTest(t)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{"userdata": []byte("#cloud-config")}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"a": "text"}, BinaryData: map[string][]byte{"b": {1}}}); err != nil {
		t.Fatal(err)
	}
	a := vmdisks.APIObjects{Client: c}
	if s, err := a.Secret(ctx, "ns", "s"); err != nil || string(s["userdata"]) != "#cloud-config" {
		t.Errorf("Secret = %q, %v", s, err)
	}
	if cm, err := a.ConfigMap(ctx, "ns", "cm"); err != nil || string(cm["a"]) != "text" || string(cm["b"]) != "\x01" || len(cm) != 2 {
		t.Errorf("ConfigMap = %q, %v", cm, err)
	}
	for _, get := range []vmdisks.ObjectGetter{a.Secret, a.ConfigMap} {
		if _, err := get(ctx, "ns", "gone"); !errors.Is(err, vmdisks.ErrNotFound) || !strings.Contains(err.Error(), `"gone" not found`) {
			t.Errorf("missing object: %v, want ErrNotFound", err)
		}
	}
}
