package datavolume_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/operators/cdi/datavolume"
)

// TestController runs the DataVolume controller against a real API server
// with the engine's DataVolume CRD (no node agent, no provisioner).
func TestController(t *testing.T) {
	cp, c, scheme := controlplane.StartEnvForTest(t, cdiv1.AddToScheme)
	ctx := context.Background()
	crdtest.Install(t, c, "datavolumes")
	opts := datavolume.DefaultOptions()
	opts.CRDPoll, opts.SkipNameValidation = 100*time.Millisecond, true
	controlplane.RunManagerForTest(t, cp, scheme, func(mgr ctrl.Manager) error { return datavolume.Setup(mgr, opts) })
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vms"}}))
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	must(t, c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "wffc"}, Provisioner: "x", VolumeBindingMode: &wffc}))
	must(t, c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "now"}, Provisioner: "x", VolumeBindingMode: &immediate}))

	newDV := func(name, class string, src cdiv1.DataVolumeSource) {
		t.Helper()
		must(t, c.Create(ctx, &cdiv1.DataVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "vms"},
			Spec: cdiv1.DataVolumeSpec{Source: &src, Storage: &cdiv1.StorageSpec{StorageClassName: &class,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		}))
	}
	waitPhase := func(name string, phase cdiv1.DataVolumePhase) *cdiv1.DataVolume {
		t.Helper()
		dv := &cdiv1.DataVolume{}
		controlplane.Eventually(t, 30*time.Second, func() bool {
			return c.Get(ctx, types.NamespacedName{Namespace: "vms", Name: name}, dv) == nil && dv.Status.Phase == phase
		})
		return dv
	}
	http := cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "http://example.invalid/disk.qcow2"}}

	t.Run("printer columns", func(t *testing.T) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		must(t, c.Get(ctx, types.NamespacedName{Name: dvapi.CRDName}, crd))
		var got []string
		for _, col := range crd.Spec.Versions[0].AdditionalPrinterColumns {
			got = append(got, col.Name)
		}
		if strings.Join(got, ",") != "Phase,Progress,Restarts,Age" || strings.Join(crd.Spec.Names.ShortNames, ",") != "dv,dvs" {
			t.Errorf("CRD columns %v short names %v, want CDI's", got, crd.Spec.Names.ShortNames)
		}
	})

	t.Run("immediate binding stays Pending", func(t *testing.T) {
		newDV("imm", "now", http)
		dv := waitPhase("imm", cdiv1.Pending)
		if dv.Status.ClaimName != "imm" {
			t.Errorf("claimName %q", dv.Status.ClaimName)
		}
		pvc := &corev1.PersistentVolumeClaim{}
		must(t, c.Get(ctx, types.NamespacedName{Namespace: "vms", Name: "imm"}, pvc))
		if !metav1.IsControlledBy(pvc, dv) || pvc.Annotations[dvapi.AnnEndpoint] != http.HTTP.URL || pvc.Annotations[dvapi.AnnSelectedNode] != "" {
			t.Errorf("PVC %+v: want owned by the DataVolume, the endpoint annotation and no selected node", pvc.ObjectMeta)
		}
	})

	t.Run("WaitForFirstConsumer until an importer node is Ready", func(t *testing.T) {
		newDV("wait", "wffc", http)
		dv := waitPhase("wait", cdiv1.WaitForFirstConsumer)
		if r := dvapi.FindCondition(dv.Status.Conditions, cdiv1.DataVolumeRunning); r == nil || r.Reason != dvapi.ReasonNoImporterNode {
			t.Errorf("Running %+v, want reason %s", r, dvapi.ReasonNoImporterNode)
		}
		// An unlabelled node is not chosen; a labelled Ready one is.
		for _, name := range []string{"plain", "importer"} {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if name == "importer" {
				n.Labels = map[string]string{v1alpha1.ImporterNodeLabel: "true"}
			}
			must(t, c.Create(ctx, n))
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			must(t, c.Status().Update(ctx, n))
		}
		waitPhase("wait", cdiv1.ImportScheduled)
		pvc := &corev1.PersistentVolumeClaim{}
		must(t, c.Get(ctx, types.NamespacedName{Namespace: "vms", Name: "wait"}, pvc))
		if got := pvc.Annotations[dvapi.AnnSelectedNode]; got != "importer" {
			t.Errorf("selected node %q, want importer", got)
		}
	})

	t.Run("upload placed like an import, UploadScheduled", func(t *testing.T) {
		newDV("up", "wffc", cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}})
		waitPhase("up", cdiv1.UploadScheduled)
		pvc := &corev1.PersistentVolumeClaim{}
		must(t, c.Get(ctx, types.NamespacedName{Namespace: "vms", Name: "up"}, pvc))
		if v, ok := pvc.Annotations[dvapi.AnnUploadRequest]; !ok || v != "" || pvc.Annotations[dvapi.AnnSource] != dvapi.SourceUpload || pvc.Annotations[dvapi.AnnSelectedNode] != "importer" {
			t.Errorf("PVC annotations %v: want the upload target, source upload and node importer", pvc.Annotations)
		}
		// UploadReady belongs to the agent: the controller keeps it.
		dv := &cdiv1.DataVolume{}
		must(t, c.Get(ctx, types.NamespacedName{Namespace: "vms", Name: "up"}, dv))
		dv.Status.Phase = cdiv1.UploadReady
		must(t, c.Status().Update(ctx, dv))
		// an owned-PVC event reconciles the DataVolume (a patch: the
		// controller writes the PVC's pod annotations too)
		must(t, c.Patch(ctx, pvc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"poke":"1"}}}`))))
		controlplane.Eventually(t, 10*time.Second, func() bool {
			return c.Get(ctx, types.NamespacedName{Namespace: "vms", Name: "up"}, dv) == nil && dv.Status.ClaimName == "up" &&
				dvapi.FindCondition(dv.Status.Conditions, cdiv1.DataVolumeBound) != nil
		})
		time.Sleep(500 * time.Millisecond) // let a wrong reconcile land, if any
		must(t, c.Get(ctx, types.NamespacedName{Namespace: "vms", Name: "up"}, dv))
		if dv.Status.Phase != cdiv1.UploadReady {
			t.Errorf("phase %q after a reconcile, want the agent's UploadReady kept", dv.Status.Phase)
		}
		// CDI's pod annotations, which virtctl image-upload waits on
		controlplane.Eventually(t, 10*time.Second, func() bool {
			return c.Get(ctx, types.NamespacedName{Namespace: "vms", Name: "up"}, pvc) == nil &&
				pvc.Annotations[dvapi.AnnPodReady] == "true" && pvc.Annotations[dvapi.AnnPodPhase] == "Running"
		})
	})

	t.Run("unsupported source fails", func(t *testing.T) {
		newDV("reg", "now", cdiv1.DataVolumeSource{S3: &cdiv1.DataVolumeSourceS3{URL: "s3://bucket/disk.img"}})
		dv := waitPhase("reg", cdiv1.Failed)
		r := dvapi.FindCondition(dv.Status.Conditions, cdiv1.DataVolumeRunning)
		if r == nil || r.Reason != dvapi.ReasonUnsupportedSource || !strings.Contains(r.Message, "DataVolume vms/reg: spec.source.s3: not supported") {
			t.Errorf("Running %+v, want reason %s naming the DataVolume", r, dvapi.ReasonUnsupportedSource)
		}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "vms", Name: "reg"}, &corev1.PersistentVolumeClaim{}); err == nil {
			t.Errorf("a PVC was created for an unsupported source")
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
