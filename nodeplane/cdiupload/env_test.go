package cdiupload_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	uploadv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/graph"
	"github.com/converge-dev/converge/internal/controlplane"
	"github.com/converge-dev/converge/nodeplane/cdiimport"
	"github.com/converge-dev/converge/nodeplane/cdiupload"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/upload"
)

const (
	node = "node-a"
	ns   = "vms"
)

type env struct {
	c      client.Client
	driver *hostpath.Driver
	pool   hostpath.Pool
	uo     upload.Options
}

func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatalf("%s not on PATH (Debian package qemu-utils) and CONVERGE_REQUIRE_NODEPLANE=1", name)
		}
		t.Skipf("%s not on PATH: install qemu-utils", name)
	}
}

// newEnv starts an API server with the DataVolume and UploadTokenRequest
// CRDs, the token issuer and node-a's upload server in one manager.
func newEnv(t *testing.T) *env {
	t.Helper()
	requireTool(t, "qemu-img")
	bin, err := controlplane.BinDir()
	if err != nil || !controlplane.Available(bin) {
		t.Skip("kube-apiserver and etcd are not in bin/: run `make controlplane`")
	}
	cp, err := controlplane.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cdiv1.AddToScheme(scheme)
	_ = uploadv1.AddToScheme(scheme)
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	must(t, err)
	ctx := context.Background()
	engine, err := graph.NewEngine()
	must(t, err)
	crds, err := engine.CRDs()
	must(t, err)
	for _, crd := range crds {
		if crd.Name == "datavolumes" || crd.Name == "uploadtokenrequests" {
			if err := c.Patch(ctx, crd.Object, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
				t.Fatalf("installing CRD %s: %v", crd.Name, err)
			}
		}
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return c.List(ctx, &cdiv1.DataVolumeList{}) == nil && c.List(ctx, &uploadv1.UploadTokenRequestList{}) == nil
	})
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
	e := &env{c: c, pool: hostpath.Pool{Name: "local", Path: t.TempDir()}}
	do := hostpath.DefaultOptions()
	do.Endpoint, do.NodeID, do.Pools = "unix://"+filepath.Join(t.TempDir(), "csi.sock"), node, []hostpath.Pool{e.pool}
	if e.driver, err = hostpath.New(do); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.driver.Close() })
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	must(t, err)
	e.uo = upload.DefaultOptions()
	e.uo.CRDPoll, e.uo.SkipNameValidation = 100*time.Millisecond, true
	must(t, upload.Setup(mgr, e.uo))
	vol := cdiimport.DefaultOptions()
	vol.NodeName, vol.Pools = node, []hostpath.Pool{e.pool}
	vol.Importer.ProgressInterval = 50 * time.Millisecond
	o := cdiupload.DefaultOptions(vol)
	o.BindAddress, o.CRDPoll, o.SkipNameValidation = "127.0.0.1:0", 100*time.Millisecond, true
	o.Log = testr.New(t)
	must(t, cdiupload.Setup(mgr, o))
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return e
}

// uploadDV creates a DataVolume with source (upload when nil) and its
// PVC Bound to a PV of nodeName, as the DataVolume controller and the
// provisioner would, and gives the path of its disk image.
func (e *env) uploadDV(t *testing.T, name, nodeName string, source map[string]any) string {
	t.Helper()
	return e.uploadDVSize(t, name, nodeName, "8Mi", source)
}

// uploadDVSize is uploadDV with a PVC size.
func (e *env) uploadDVSize(t *testing.T, name, nodeName, sizeStr string, source map[string]any) string {
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
	size := resource.MustParse(sizeStr)
	id := "pvc-" + string(dv.UID)
	if nodeName == node { // the real driver makes the volume (volume.json, data/)
		_, err := e.driver.Controller().CreateVolume(ctx, &csi.CreateVolumeRequest{
			Name: id, CapacityRange: &csi.CapacityRange{RequiredBytes: size.Value()},
			VolumeCapabilities: []*csi.VolumeCapability{{
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			}},
			Parameters: map[string]string{hostpath.ParameterStoragePool: e.pool.Name},
		})
		must(t, err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: id},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: hostpath.DefaultDriverName, VolumeHandle: id,
				VolumeAttributes: map[string]string{hostpath.ParameterStoragePool: e.pool.Name},
			}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostpath.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName}}},
			}}}},
		},
	}
	must(t, e.c.Create(ctx, pv))
	yes := true
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume", Name: name, UID: dv.UID, Controller: &yes}}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			VolumeName:  id,
		},
	}
	must(t, e.c.Create(ctx, pvc))
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	must(t, e.c.Status().Update(ctx, pvc))
	return filepath.Join(e.pool.Path, id, "data", "disk.img")
}

func (e *env) dv(t *testing.T, name string) *cdiv1.DataVolume {
	t.Helper()
	dv := &cdiv1.DataVolume{}
	must(t, e.c.Get(context.Background(), keyOf(name), dv))
	return dv
}

func (e *env) waitPhase(t *testing.T, name string, phase cdiv1.DataVolumePhase) *cdiv1.DataVolume {
	t.Helper()
	var dv *cdiv1.DataVolume
	controlplane.Eventually(t, 60*time.Second, func() bool {
		dv = e.dv(t, name)
		return dv.Status.Phase == phase
	})
	return dv
}

// token creates an UploadTokenRequest for pvc and waits for its token.
func (e *env) token(t *testing.T, pvc string) string {
	t.Helper()
	ctx := context.Background()
	utr := &uploadv1.UploadTokenRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: pvc + "-", Namespace: ns},
		Spec: uploadv1.UploadTokenRequestSpec{PvcName: pvc}}
	must(t, e.c.Create(ctx, utr))
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return e.c.Get(ctx, client.ObjectKeyFromObject(utr), utr) == nil && utr.Status.Token != ""
	})
	return utr.Status.Token
}

func (e *env) endpoint(t *testing.T) cdiupload.Endpoint {
	t.Helper()
	var ep cdiupload.Endpoint
	controlplane.Eventually(t, 30*time.Second, func() bool {
		n := &corev1.Node{}
		if e.c.Get(context.Background(), types.NamespacedName{Name: node}, n) != nil {
			return false
		}
		var err error
		ep, err = cdiupload.EndpointFromNode(n)
		return err == nil
	})
	return ep
}

func images(t *testing.T) (raw, qcow2 []byte) {
	t.Helper()
	dir := t.TempDir()
	rawPath, qPath := filepath.Join(dir, "src.raw"), filepath.Join(dir, "src.qcow2")
	b := make([]byte, 8<<20)
	for i := 0; i < len(b); i += 4096 {
		if (i/4096)%3 != 0 { // every third block stays a hole
			copy(b[i:], bytes.Repeat([]byte{byte(i / 4096)}, 4096))
		}
	}
	must(t, os.WriteFile(rawPath, b, 0o600))
	out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", rawPath, qPath).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	q, err := os.ReadFile(qPath)
	must(t, err)
	return b, q
}

func sha(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func keyOf(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
