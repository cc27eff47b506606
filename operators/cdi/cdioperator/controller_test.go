package cdioperator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/operators/cdi/cdioperator"
	"github.com/converge-dev/converge/operators/cdi/datavolume"
	"github.com/converge-dev/converge/operators/cdi/uploadtoken"
	"github.com/converge-dev/converge/operators/operand"
)

// ns is the operator's namespace: the roles of the cluster-scoped CDI and
// the upload token keys.
const ns = "converge-system"

var hppGVK = cdioperator.HostPathProvisioner

// env is an API server with kube-controller-manager's DaemonSet controller
// and garbage collector, the CRDs of the CDI roles, the operator's
// namespace and one Node without a kubelet.
func env(t *testing.T) (*controlplane.Env, client.Client, *runtime.Scheme) {
	e, _ := controlplane.StartWithControllerManagerForTest(t, "daemonset-controller", "garbage-collector-controller")
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, cdiv1.AddToScheme, uploadv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	crdtest.Install(t, c, "cdis", "hostpathprovisioners", "datavolumes")
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"kubernetes.io/os": "linux"}}}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vms"}}, node} {
		must(t, c.Create(ctx, o))
	}
	// The API server taints a new Node not-ready until a kubelet reports;
	// none runs here: lift it as the node lifecycle controller would.
	node.Spec.Taints = nil
	must(t, c.Update(ctx, node))
	return e, c, scheme
}

// run starts a manager with the CDI operator and, gated on it as in
// converge-controller, the DataVolume controller (following the active
// CDI) and the cdi-apiserver role's signing key; it gives a channel receiving what the
// manager returned.
func run(t *testing.T, e *controlplane.Env, scheme *runtime.Scheme) <-chan error {
	t.Helper()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	must(t, err)
	engine, err := graph.NewEngine()
	must(t, err)
	o := operand.DefaultOptions()
	o.Images, o.Namespace, o.Version = map[string]string{"node": "registry.local/converge-node:test"}, ns, "v-test"
	o.Poll, o.WaitTimeout, o.SkipNameValidation = 200*time.Millisecond, 30*time.Second, true
	gates, err := cdioperator.Setup(mgr, engine, cdioperator.Options{UploadKeysNamespace: ns}, o)
	must(t, err)
	dvo := datavolume.DefaultOptions()
	dvo.CRDPoll, dvo.SkipNameValidation = 100*time.Millisecond, true
	dvo.Gate = func(ctx context.Context) error { return gates.Wait(ctx, cdioperator.RoleController) }
	dvo.CDI = cdioperator.Active(mgr.GetClient())
	must(t, datavolume.Setup(mgr, dvo))
	// the cdi-apiserver role's first step once its gate opens, as
	// uploadapi.Setup takes it: the signing key
	uo := uploadtoken.DefaultOptions()
	uo.KeySecret.Namespace, uo.PublicKeys.Namespace = ns, ns
	direct, err := client.New(e.Config, client.Options{Scheme: scheme})
	must(t, err)
	must(t, mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if gates.Wait(ctx, cdioperator.RoleAPIServer) != nil {
			return nil
		}
		_, err := uploadtoken.EnsureKeys(ctx, direct, uo)
		return err
	})))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	out := make(chan error, 1)
	stopped := make(chan struct{})
	go func() { err := <-done; out <- err; close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })
	return out
}

func cr(kind, name string, spec map[string]any) *unstructured.Unstructured {
	gvk := cdioperator.GVK
	if kind == hppGVK.Kind {
		gvk = hppGVK
	}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name,
		"annotations": map[string]any{operand.NativeAnnotation: operand.Native}}, "spec": spec}}
	u.SetGroupVersionKind(gvk)
	return u
}

// condition gives u's condition typ as "Status Reason: message".
func condition(u *unstructured.Unstructured, typ string) string {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range raw {
		m := x.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprintf("%v %v: %v", m["status"], m["reason"], m["message"])
		}
	}
	return ""
}

// waitCR polls the CR until ok holds, failing with its status.
func waitCR(t *testing.T, c client.Client, u *unstructured.Unstructured, what string, ok func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		err := c.Get(context.Background(), client.ObjectKeyFromObject(u), got)
		if err == nil && ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			st, _, _ := unstructured.NestedMap(got.Object, "status")
			t.Fatalf("%s %s: %s not reached in 1m (get: %v); status %v", u.GetKind(), u.GetName(), what, err, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOperator runs the CDI operator with the DataVolume controller and
// the cdi-apiserver role's signing key on a real API server with kube-controller-
// manager and a Node without a kubelet:
//
//   - before any native CDI, neither CDI role runs: a DataVolume gets no
//     PVC and no signing key is made;
//   - a native CDI opens both gates: the PVC is created, sized with the
//     CDI's filesystem overhead, and the signing key appears; without a
//     HostPathProvisioner the CDI has the importer's identity only and is
//     Available;
//   - a HostPathProvisioner's pools re-derive the CDI: the importer
//     DaemonSet serves them, its pod is created and never runs, so the CDI
//     reads Progressing (an update at the same generation, not Degraded)
//     naming the DaemonSet and the pod;
//   - a refused field (scratchSpaceStorageClass) is Degraded
//     UnsupportedConfiguration naming it, and what runs stays;
//   - deleting the CDI removes what it derived, and the manager ends with
//     operand.ErrRoleGone (its roles have no CDI any more).
func TestOperator(t *testing.T) {
	e, c, scheme := env(t)
	done := run(t, e, scheme)
	ctx := context.Background()

	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	must(t, c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-csi-local"}, Provisioner: "kubevirt.io.hostpath-provisioner", VolumeBindingMode: &wffc}))
	class := "hostpath-csi-local"
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "disk", Namespace: "vms"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{StorageClassName: &class, Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}
	must(t, c.Create(ctx, dv))
	pvcKey := types.NamespacedName{Namespace: "vms", Name: "disk"}
	keyKey := types.NamespacedName{Namespace: ns, Name: uploadtoken.DefaultOptions().KeySecret.Name}

	// No native CDI: the roles wait. A CDI marked external does not open
	// them either.
	ext := cr("CDI", "external", map[string]any{})
	ext.SetAnnotations(map[string]string{operand.NativeAnnotation: "external"})
	must(t, c.Create(ctx, ext))
	time.Sleep(2 * time.Second)
	if err := c.Get(ctx, pvcKey, &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
		t.Fatalf("PVC of the DataVolume before any native CDI: %v, want none (the DataVolume controller must wait)", err)
	}
	if err := c.Get(ctx, keyKey, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("signing key before any native CDI: %v, want none (the cdi-apiserver role must wait)", err)
	}

	cdi := cr("CDI", "cdi-kubevirt-hyperconverged", map[string]any{"config": map[string]any{
		"featureGates":       []any{"HonorWaitForFirstConsumer", "DataVolumeClaimAdoption"},
		"filesystemOverhead": map[string]any{"global": "0.055", "storageClass": map[string]any{class: "0.1"}}}})
	must(t, c.Create(ctx, cdi))
	pvc := &corev1.PersistentVolumeClaim{}
	controlplane.Eventually(t, 30*time.Second, func() bool { return c.Get(ctx, pvcKey, pvc) == nil })
	if got, want := pvc.Spec.Resources.Requests.Storage().Value(), datavolume.RequiredSpace(0.1, 1<<30); got != want {
		t.Errorf("PVC size %d, want %d (1Gi with the StorageClass's overhead 0.1)", got, want)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool { return c.Get(ctx, keyKey, &corev1.Secret{}) == nil })
	got := waitCR(t, c, cdi, "Available without a HostPathProvisioner", func(u *unstructured.Unstructured) bool {
		return strings.HasPrefix(condition(u, "Available"), "True AllComponentsReady")
	})
	for field, want := range map[string]any{"phase": "Deployed", "operatorVersion": "v-test", "targetVersion": "v-test", "observedVersion": "v-test"} {
		if v, _, _ := unstructured.NestedFieldNoCopy(got.Object, "status", field); v != want {
			t.Errorf("status.%s = %v, want %v", field, v, want)
		}
	}
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "converge-cdi-importer"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "converge-cdi-importer"}},
	} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Errorf("%T %s: %v", o, o.GetName(), err)
		}
	}
	ds := &appsv1.DaemonSet{}
	dsKey := types.NamespacedName{Namespace: ns, Name: "converge-cdi-importer"}
	if err := c.Get(ctx, dsKey, ds); !apierrors.IsNotFound(err) {
		t.Errorf("importer DaemonSet without pools: %v, want none", err)
	}

	// A HostPathProvisioner's pools: the importer serves them.
	start := time.Now()
	must(t, c.Create(ctx, cr("HostPathProvisioner", "hostpath-provisioner", map[string]any{
		"storagePools": []any{map[string]any{"name": "local", "path": "/var/hpvolumes"}}})))
	got = waitCR(t, c, cdi, "Progressing on the importer's pending pod", func(u *unstructured.Unstructured) bool {
		return strings.Contains(condition(u, "Progressing"), "True UpdateInProgress: DaemonSet converge-system/converge-cdi-importer: 0 of 1 pods ready, pod converge-cdi-importer-") &&
			strings.Contains(condition(u, "Progressing"), "not scheduled to a node yet")
	})
	t.Logf("CDI Progressing on the importer's pod %s after the HostPathProvisioner", time.Since(start).Round(time.Millisecond))
	if d := condition(got, "Degraded"); !strings.HasPrefix(d, "False") {
		t.Errorf("Degraded = %s: a DaemonSet added by an input is an update, not a loss", d)
	}
	must(t, c.Get(ctx, dsKey, ds))
	args := ds.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--storage-pool=local=/var/hpvolumes", "--upload-keys-namespace=" + ns} {
		if !slices.Contains(args, want) {
			t.Errorf("importer args %v lack %s", args, want)
		}
	}
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != "registry.local/converge-node:test" {
		t.Errorf("importer image %s", img)
	}

	// A refused field: Degraded, nothing changed.
	must(t, c.Patch(ctx, cdi, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"config":{"scratchSpaceStorageClass":"local"}}}`))))
	waitCR(t, c, cdi, "Degraded naming the refused field", func(u *unstructured.Unstructured) bool {
		return strings.HasPrefix(condition(u, "Degraded"), "True UnsupportedConfiguration: spec.config.scratchSpaceStorageClass: converge imports without scratch space")
	})
	if err := c.Get(ctx, dsKey, ds); err != nil {
		t.Errorf("importer DaemonSet after a refused CR: %v", err)
	}

	// Deletion removes what was derived; the CDI roles end the manager.
	must(t, c.Delete(ctx, cdi))
	controlplane.Eventually(t, time.Minute, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cdi), cdi.DeepCopy()))
	})
	for _, o := range []client.Object{ds, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "converge-cdi-importer"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "converge-cdi-importer"}}} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s left after the CDI was deleted: %v", o, o.GetName(), err)
		}
	}
	select {
	case err := <-done:
		if !errors.Is(err, operand.ErrRoleGone) {
			t.Errorf("manager ended with %v, want ErrRoleGone", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the manager still runs after the last native CDI went")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
