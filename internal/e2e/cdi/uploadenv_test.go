package cdi_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	uploadv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/internal/aggregated"
	"github.com/converge-dev/converge/internal/testing/aggregatedtest"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/cdi/uploadserver"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/operators/cdi/uploadapi"
	"github.com/converge-dev/converge/operators/cdi/uploadtoken"
)

type uploadEnv struct {
	c      client.Client
	driver *hostpath.Driver
	pool   hostpath.Pool
	uo     uploadtoken.Options
}

// newUploadEnv starts an API server with the DataVolume CRD, converge's
// aggregated upload API (upload.cdi.kubevirt.io, startUploadAPI) and
// node-a's upload server in a manager.
func newUploadEnv(t *testing.T) *uploadEnv {
	t.Helper()
	storagetest.RequireTool(t, "qemu-img", "qemu-utils")
	cp, c, scheme := controlplane.StartEnvForTest(t, cdiv1.AddToScheme, uploadv1.AddToScheme)
	ctx := context.Background()
	crdtest.Install(t, c, "datavolumes")
	for _, n := range []string{ns, "converge-system"} {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	for _, name := range []string{node, "node-b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		must(t, c.Create(ctx, n))
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
		must(t, c.Status().Update(ctx, n))
	}

	ctrl.SetLogger(testr.New(t))
	e := &uploadEnv{c: c}
	e.driver, e.pool = storagetest.StartDriver(t, node, "local")
	e.uo = uploadtoken.DefaultOptions()
	startUploadAPI(t, cp, e.uo)
	vol := importcontroller.DefaultOptions()
	vol.NodeName, vol.Pools = node, []hostpath.Pool{e.pool}
	vol.Importer.ProgressInterval = 50 * time.Millisecond
	o := uploadserver.DefaultOptions(vol)
	o.BindAddress, o.CRDPoll, o.SkipNameValidation = "127.0.0.1:0", 100*time.Millisecond, true
	o.Log = testr.New(t)
	controlplane.RunManagerForTest(t, cp, scheme,
		func(mgr ctrl.Manager) error { return uploadserver.Setup(mgr, o) })
	return e
}

// uploadDV creates a DataVolume with source (upload when nil) and its
// PVC Bound to a PV of nodeName, as the DataVolume controller and the
// provisioner would, and gives the path of its disk image.
func (e *uploadEnv) uploadDV(t *testing.T, name, nodeName string, source map[string]any) string {
	t.Helper()
	return e.uploadDVSize(t, name, nodeName, "8Mi", source)
}

// uploadDVSize is uploadDV with a PVC size.
func (e *uploadEnv) uploadDVSize(t *testing.T, name, nodeName, sizeStr string, source map[string]any) string {
	t.Helper()
	ctx := context.Background()
	if source == nil {
		source = map[string]any{"upload": map[string]any{}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"source": source,
			"storage": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": sizeStr}}}},
	}}
	must(t, e.c.Create(ctx, u))
	dv := &cdiv1.DataVolume{}
	must(t, e.c.Get(ctx, keyOf(name), dv))
	v := storagetest.Volume{ID: "pvc-" + string(dv.UID), Size: resource.MustParse(sizeStr), Pool: e.pool, Node: nodeName}
	if nodeName == node { // the real driver makes the volume (volume.json, data/)
		must(t, v.Create(ctx, e.driver))
	}
	must(t, e.c.Create(ctx, v.PV()))
	pvc := v.DataVolumeClaim(ns, name, dv.UID)
	must(t, e.c.Create(ctx, pvc))
	must(t, storagetest.MarkBound(ctx, e.c, pvc, v.Size))
	return filepath.Join(e.pool.Path, v.ID, "data", "disk.img")
}

func (e *uploadEnv) dv(t *testing.T, name string) *cdiv1.DataVolume {
	t.Helper()
	dv := &cdiv1.DataVolume{}
	must(t, e.c.Get(context.Background(), keyOf(name), dv))
	return dv
}

func (e *uploadEnv) waitPhase(t *testing.T, name string, phase cdiv1.DataVolumePhase) *cdiv1.DataVolume {
	t.Helper()
	var dv *cdiv1.DataVolume
	controlplane.Eventually(t, 60*time.Second, func() bool {
		dv = e.dv(t, name)
		return dv.Status.Phase == phase
	})
	return dv
}

// token creates an UploadTokenRequest for pvc through the aggregated API
// and gives the token its answer carries.
func (e *uploadEnv) token(t *testing.T, pvc string) string {
	t.Helper()
	utr := &uploadv1.UploadTokenRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: pvc + "-", Namespace: ns},
		Spec: uploadv1.UploadTokenRequestSpec{PvcName: pvc}}
	must(t, e.c.Create(context.Background(), utr))
	if utr.Status.Token == "" {
		t.Fatalf("UploadTokenRequest for %s: created without status.token", pvc)
	}
	return utr.Status.Token
}

// startUploadAPI serves upload.cdi.kubevirt.io/v1beta1 (operators/cdi/
// uploadapi) with the keys of o, registered with cp's aggregation layer as
// converge-controller registers it, until t ends.
func startUploadAPI(t testing.TB, cp *controlplane.Env, o uploadtoken.Options) {
	t.Helper()
	aggregatedtest.Start(t, cp, func(c client.Client, _ string) aggregated.API {
		k := &uploadtoken.Keeper{Client: c, Options: o}
		return uploadapi.API(uploadapi.Options{Key: k.Key, Lifetime: o.TokenLifetime})
	})
}

func (e *uploadEnv) endpoint(t *testing.T) nodeendpoint.Endpoint {
	t.Helper()
	var ep nodeendpoint.Endpoint
	controlplane.Eventually(t, 30*time.Second, func() bool {
		n := &corev1.Node{}
		if e.c.Get(context.Background(), types.NamespacedName{Name: node}, n) != nil {
			return false
		}
		var err error
		ep, err = nodeendpoint.Upload.FromNode(n)
		return err == nil
	})
	return ep
}
