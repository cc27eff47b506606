package importcontroller_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

// TestAgent runs node-a's cdi-importer alone against a real API server
// with the DataVolume CRD; the test plays the cluster side through the
// contract only (api/datavolume), binding each DataVolume's PVC to a
// volume the real hostpath driver made, as the DataVolume controller,
// provisioner and PV controller would. (internal/e2e/cdi runs the real
// DataVolume controller with it.) It checks that the agent labels its
// Node, imports an http qcow2 source into disk.img with the conditions
// and Event of a success, makes a blank image, and leaves an upload
// DataVolume to the upload server.
func TestAgent(t *testing.T) {
	storagetest.RequireTool(t, "qemu-img", "qemu-utils")
	ctrl.SetLogger(logr.Discard())
	cp, c, scheme := controlplane.StartEnvForTest(t, cdiv1.AddToScheme)
	ctx := context.Background()
	crdtest.Install(t, c, "datavolumes")
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vms"}}))
	must(t, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))
	driver, pool := storagetest.StartDriver(t, node, "local")
	o := importcontroller.DefaultOptions()
	o.NodeName, o.Pools = node, []hostpath.Pool{pool}
	o.StatusInterval, o.CRDPoll, o.SkipNameValidation = 100*time.Millisecond, 100*time.Millisecond, true
	controlplane.RunManagerForTest(t, cp, scheme, func(mgr ctrl.Manager) error { return importcontroller.Setup(mgr, o) })
	controlplane.Eventually(t, 30*time.Second, func() bool {
		n := &corev1.Node{}
		return c.Get(ctx, client.ObjectKey{Name: node}, n) == nil && n.Labels[v1alpha1.ImporterNodeLabel] == "true"
	})

	raw, qcow2 := storagetest.Images(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(qcow2) }))
	t.Cleanup(srv.Close)
	create := func(name string, src cdiv1.DataVolumeSource) string {
		t.Helper()
		size := resource.MustParse("8Mi")
		dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: name}, Spec: cdiv1.DataVolumeSpec{Source: &src,
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}}}}
		must(t, c.Create(ctx, dv))
		v := storagetest.Volume{ID: "pvc-" + string(dv.UID), Size: size, Pool: pool, Node: node}
		must(t, v.Create(ctx, driver))
		must(t, c.Create(ctx, v.PV()))
		pvc := v.DataVolumeClaim("vms", name, dv.UID)
		must(t, c.Create(ctx, pvc))
		must(t, storagetest.MarkBound(ctx, c, pvc, v.Size))
		return filepath.Join(pool.Path, v.ID, "data", importcontroller.DiskImage)
	}
	final := func(name string) *cdiv1.DataVolume {
		t.Helper()
		dv := &cdiv1.DataVolume{}
		controlplane.Eventually(t, 60*time.Second, func() bool {
			return c.Get(ctx, client.ObjectKey{Namespace: "vms", Name: name}, dv) == nil &&
				(dv.Status.Phase == cdiv1.Succeeded || dv.Status.Phase == cdiv1.Failed)
		})
		return dv
	}

	httpDisk := create("fedora", cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: srv.URL + "/disk.qcow2"}})
	blankDisk := create("scratch", cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}})
	uploadDisk := create("upload", cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}})

	dv := final("fedora")
	running, ready := datavolume.FindCondition(dv.Status.Conditions, cdiv1.DataVolumeRunning), datavolume.FindCondition(dv.Status.Conditions, cdiv1.DataVolumeReady)
	if dv.Status.Phase != cdiv1.Succeeded || dv.Status.Progress != "100.0%" || running == nil || running.Reason != datavolume.ReasonCompleted ||
		ready == nil || ready.Status != corev1.ConditionTrue {
		t.Errorf("http DataVolume: phase %s, progress %s, conditions %+v; want Succeeded, 100.0%%, Running=False %s, Ready=True",
			dv.Status.Phase, dv.Status.Progress, dv.Status.Conditions, datavolume.ReasonCompleted)
	}
	got, err := os.ReadFile(httpDisk)
	must(t, err)
	if !bytes.Equal(got, raw) {
		t.Errorf("%s (%d bytes) is not the raw image (%d bytes)", httpDisk, len(got), len(raw))
	}
	// the Event is recorded after the status write, asynchronously
	controlplane.Eventually(t, 30*time.Second, func() bool {
		evs := &corev1.EventList{}
		if c.List(ctx, evs, client.InNamespace("vms")) != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "fedora" && e.Reason == importcontroller.EventImportSucceeded && e.Source.Component == importcontroller.EventSource {
				return true
			}
		}
		return false
	})

	if dv := final("scratch"); dv.Status.Phase != cdiv1.Succeeded {
		t.Errorf("blank DataVolume: phase %s, want Succeeded; conditions %+v", dv.Status.Phase, dv.Status.Conditions)
	}
	if st, err := os.Stat(blankDisk); err != nil || st.Size() != 8<<20 {
		t.Errorf("%s: %v, want a file of 8 MiB", blankDisk, err)
	}

	up := &cdiv1.DataVolume{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: "vms", Name: "upload"}, up))
	if up.Status.Phase != "" || up.Status.RestartCount != 0 {
		t.Errorf("upload DataVolume: phase %q, restartCount %d; want it left to the upload server", up.Status.Phase, up.Status.RestartCount)
	}
	if _, err := os.Stat(uploadDisk); !os.IsNotExist(err) {
		t.Errorf("%s: stat %v, want absent (the importer does not fill uploads)", uploadDisk, err)
	}
}
