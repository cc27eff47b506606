package provisioner_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cloneClaim creates a claim of wffcClass whose spec.dataSource is PVC
// source (or, with ref, whose spec.dataSourceRef is).
func (f *fixture) cloneClaim(t *testing.T, name, source, size string, block, ref bool) *corev1.PersistentVolumeClaim {
	t.Helper()
	class := wffcClass
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if ref {
		pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: source}
	} else {
		pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: source}
	}
	if block {
		m := corev1.PersistentVolumeBlock
		pvc.Spec.VolumeMode = &m
	}
	f.mk(t, pvc)
	return pvc
}

// dataPath is the file holding a volume's bytes in a test: the disk file
// of a block volume, data/payload in a filesystem volume.
func dataPath(pool string, pv *corev1.PersistentVolume, block bool) string {
	if block {
		return filepath.Join(pool, pv.Spec.CSI.VolumeHandle, "disk.img")
	}
	return filepath.Join(pool, pv.Spec.CSI.VolumeHandle, "data", "payload")
}

// TestClone: a PVC whose data source is a Bound PVC of the driver on the
// same node gets a copy of its bytes (block: the disk file, 1 MiB of
// random data at offset 1 MiB; filesystem: a file), by spec.dataSource and
// by spec.dataSourceRef, at the larger size asked; the source keeps its
// bytes.
func TestClone(t *testing.T) {
	f := start(t)
	for _, tc := range []struct {
		name  string
		block bool
		ref   bool
	}{
		{"block", true, false},
		{"filesystem", false, false},
		{"block-ref", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := f.claim(t, "golden-"+tc.name, wffcClass, "10Mi", tc.block)
			f.selectNode(t, src, node)
			srcPV := f.waitBound(t, src)
			payload := make([]byte, 1<<20)
			rand.Read(payload)
			path := dataPath(f.pool, srcPV, tc.block)
			fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			off := int64(0)
			if tc.block {
				off = 1 << 20
			}
			if _, err := fh.WriteAt(payload, off); err != nil {
				t.Fatal(err)
			}
			fh.Close()

			clone := f.cloneClaim(t, "clone-"+tc.name, src.Name, "20Mi", tc.block, tc.ref)
			start := time.Now()
			f.selectNode(t, clone, node)
			pv := f.waitBound(t, clone)
			t.Logf("%s: selected-node set → clone Bound in %s", tc.name, time.Since(start))
			if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("20Mi")) != 0 {
				t.Errorf("clone PV capacity %s, want 20Mi", q.String())
			}
			got, err := os.ReadFile(dataPath(f.pool, pv, tc.block))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.block && len(got) != 20<<20 {
				t.Errorf("clone disk file %d bytes, want %d", len(got), 20<<20)
			}
			if len(got) < len(want) || !bytes.Equal(got[:len(want)], want) {
				t.Errorf("clone's bytes differ from the source's (%d vs %d bytes)", len(got), len(want))
			}
			if !bytes.Equal(want[off:off+int64(len(payload))], payload) {
				t.Errorf("source's bytes changed")
			}
		})
	}
}

// TestCloneRefusals: a clone whose selected node is not its source's node
// (the volumes are node-local) is refused by that node's provisioner with a
// ProvisioningFailed event naming both nodes, and nothing is created
// there; so are a clone smaller than its source, a clone of another volume
// mode, and (until the source is Bound, then it is provisioned) a clone of
// a Pending source.
func TestCloneRefusals(t *testing.T) {
	f := start(t)
	poolB := f.startNode(t, "node-b")
	src := f.claim(t, "golden", wffcClass, "10Mi", true)
	f.selectNode(t, src, node)
	f.waitBound(t, src)

	away := f.cloneClaim(t, "clone-on-b", src.Name, "10Mi", true, false)
	f.selectNode(t, away, "node-b")
	e := f.waitEvent(t, away, "ProvisioningFailed", "local to their node")
	t.Logf("cross-node clone refused: %s", e.Message)

	small := f.cloneClaim(t, "clone-small", src.Name, "5Mi", true, false)
	f.selectNode(t, small, node)
	e = f.waitEvent(t, small, "ProvisioningFailed", "greater than or equal in size")
	t.Logf("smaller clone refused: %s", e.Message)

	mode := f.cloneClaim(t, "clone-fs", src.Name, "10Mi", false, false)
	f.selectNode(t, mode, node)
	e = f.waitEvent(t, mode, "ProvisioningFailed", "same volume mode")
	t.Logf("volume-mode change refused: %s", e.Message)

	pending := f.claim(t, "not-yet", wffcClass, "10Mi", true)
	early := f.cloneClaim(t, "clone-early", pending.Name, "10Mi", true, false)
	f.selectNode(t, early, node)
	e = f.waitEvent(t, early, "ProvisioningFailed", "must be Bound")
	t.Logf("clone of a Pending source waits: %s", e.Message)
	f.selectNode(t, pending, node)
	f.waitBound(t, pending)
	f.waitBound(t, early)

	for _, pvc := range []*corev1.PersistentVolumeClaim{away, small, mode} {
		got := &corev1.PersistentVolumeClaim{}
		if err := f.c.Get(context.Background(), clientKey(pvc), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != corev1.ClaimPending {
			t.Errorf("PVC %s: phase %s, want Pending", pvc.Name, got.Status.Phase)
		}
	}
	if entries, err := os.ReadDir(poolB); err == nil && len(entries) != 0 {
		t.Errorf("node-b's pool holds %d entries, want none", len(entries))
	}
}

func clientKey(o *corev1.PersistentVolumeClaim) client.ObjectKey {
	return client.ObjectKeyFromObject(o)
}
