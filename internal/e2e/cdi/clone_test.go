package cdi_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

// TestClone clones hostpath volumes through the real API server, as CDI's
// host-assisted clone: a DataVolume whose spec.sourceRef names a
// DataSource, and one with spec.source.pvc, are placed on their source's
// node and filled by that node's cdi-importer with a sparse copy; a
// snapshot DataSource fails, a missing one waits, and a clone bound on
// another node than its source fails with CrossNodeClone.
func TestClone(t *testing.T) {
	e := newImportEnv(t)
	ctx := context.Background()
	raw, qcow2 := storagetest.Images(t)
	url := serve(t, &slowServer{files: map[string][]byte{"/disk.qcow2": qcow2}})
	e.createDV(t, "golden", "16Mi", map[string]any{"http": map[string]any{"url": url + "/disk.qcow2"}})
	dataSource := func(name string, source map[string]any) {
		t.Helper()
		must(t, e.c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"source": source},
		}}))
	}
	// createClone creates a DataVolume of class (default the test's
	// WaitForFirstConsumer one) with spec (sourceRef or source) and no
	// size: a clone takes its source's.
	createClone := func(name, class string, spec map[string]any) {
		t.Helper()
		if class == "" {
			class = scName
		}
		spec["storage"] = map[string]any{"storageClassName": class}
		must(t, e.c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
		}}))
	}
	dataSource("fedora", map[string]any{"pvc": map[string]any{"name": "golden", "namespace": ns}})
	createClone("from-ref", "", map[string]any{"sourceRef": map[string]any{"kind": "DataSource", "name": "fedora"}})
	createClone("from-pvc", "", map[string]any{"source": map[string]any{"pvc": map[string]any{"name": "golden", "namespace": ns}}})

	for _, name := range []string{"golden", "from-ref", "from-pvc"} {
		start := time.Now()
		dv := e.waitPhase(t, name, cdiv1.Succeeded, cdiv1.Failed)
		t.Logf("%s: %s after %v", name, dv.Status.Phase, time.Since(start))
		if dv.Status.Phase != cdiv1.Succeeded {
			t.Fatalf("%s: phase %s, want Succeeded; conditions %+v", name, dv.Status.Phase, dv.Status.Conditions)
		}
	}
	want := append(append([]byte{}, raw...), make([]byte, 16<<20-len(raw))...)
	for _, name := range []string{"from-ref", "from-pvc"} {
		got, err := os.ReadFile(e.diskPath(t, name))
		must(t, err)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: disk.img (%d bytes) differs from the source's", name, len(got))
		}
		if a := allocated(t, e.diskPath(t, name)); a >= int64(len(got)) {
			t.Errorf("%s: %d bytes allocated of %d, want sparse", name, a, len(got))
		}
		pvc := &corev1.PersistentVolumeClaim{}
		must(t, e.c.Get(ctx, keyOf(name), pvc))
		if pvc.Annotations[dvapi.AnnCloneRequest] != ns+"/golden" || pvc.Annotations[dvapi.AnnSelectedNode] != node || pvc.Annotations[dvapi.AnnSource] != "" {
			t.Errorf("%s: PVC annotations %v: want %s=%s/golden, the source's node %s, no %s", name, pvc.Annotations, dvapi.AnnCloneRequest, ns, node, dvapi.AnnSource)
		}
		if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.Value() != 16<<20 {
			t.Errorf("%s: PVC asks for %s, want the source's 16Mi", name, q.String())
		}
	}

	t.Run("snapshot DataSource fails", func(t *testing.T) {
		dataSource("snap", map[string]any{"snapshot": map[string]any{"name": "s1", "namespace": ns}})
		createClone("from-snap", "", map[string]any{"sourceRef": map[string]any{"kind": "DataSource", "name": "snap"}})
		dv := e.waitPhase(t, "from-snap", cdiv1.Failed)
		c := wantCond(t, dv, cdiv1.DataVolumeRunning, corev1.ConditionFalse, dvapi.ReasonUnsupportedSource)
		if c != nil && !strings.Contains(c.Message, "DataSource vms/snap: spec.source.snapshot: not supported by converge") {
			t.Errorf("message %q", c.Message)
		}
	})
	t.Run("missing DataSource waits", func(t *testing.T) {
		createClone("from-nothing", "", map[string]any{"sourceRef": map[string]any{"kind": "DataSource", "name": "nothing"}})
		var dv *cdiv1.DataVolume
		controlplane.Eventually(t, 30*time.Second, func() bool {
			dv = e.dv(t, "from-nothing")
			c := dvapi.FindCondition(dv.Status.Conditions, cdiv1.DataVolumeRunning)
			return c != nil && c.Reason == dvapi.ReasonCloneWithoutSource
		})
		if dv.Status.Phase != cdiv1.Pending || !strings.Contains(dvapi.FindCondition(dv.Status.Conditions, cdiv1.DataVolumeRunning).Message, "DataSource vms/nothing doesn't exist") {
			t.Errorf("phase %s conditions %+v: want Pending, naming the DataSource", dv.Status.Phase, dv.Status.Conditions)
		}
		// The DataSource appears: the clone goes on.
		dataSource("nothing", map[string]any{"pvc": map[string]any{"name": "golden"}})
		if dv := e.waitPhase(t, "from-nothing", cdiv1.Succeeded, cdiv1.Failed); dv.Status.Phase != cdiv1.Succeeded {
			t.Errorf("phase %s once the DataSource exists; conditions %+v", dv.Status.Phase, dv.Status.Conditions)
		}
	})
	t.Run("a clone bound on another node fails", func(t *testing.T) {
		imm := storagev1.VolumeBindingImmediate
		must(t, e.c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-immediate"},
			Provisioner: hostpath.DefaultDriverName, VolumeBindingMode: &imm}))
		createClone("xnode", "hostpath-immediate", map[string]any{"sourceRef": map[string]any{"kind": "DataSource", "name": "fedora"}})
		pvc := &corev1.PersistentVolumeClaim{}
		controlplane.Eventually(t, 30*time.Second, func() bool { return e.c.Get(ctx, keyOf("xnode"), pvc) == nil })
		must(t, e.bind(ctx, pvc, "node-b"))
		dv := e.waitPhase(t, "xnode", cdiv1.Failed, cdiv1.Succeeded)
		c := wantCond(t, dv, cdiv1.DataVolumeRunning, corev1.ConditionFalse, dvapi.ReasonCrossNodeClone)
		if c != nil && !strings.Contains(c.Message, `PVC xnode is bound on node "node-b", its source PVC vms/golden on node "node-a"`) {
			t.Errorf("message %q", c.Message)
		}
	})
}
