package hppoperator_test

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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/operators/hostpath/hppoperator"
	"github.com/converge-dev/converge/operators/operand"
)

// ns is the operator's namespace, where the roles of the cluster-scoped
// HostPathProvisioner go.
const ns = "converge-system"

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

// TestOperator runs the HostPathProvisioner operator on a real API server
// with kube-controller-manager's DaemonSet controller and garbage
// collector and a Node without a kubelet: the CR's pools give the
// CSIDriver, a StorageClass each and the hostpath-csi DaemonSet with
// kubelet registration, whose pod is created and never runs, so the CR
// truthfully reads Progressing naming the DaemonSet and the pod; a new
// pool is applied (its StorageClass, its --storage-pool); a pvcTemplate
// without a size is refused naming it, leaving what runs; a pvcTemplate
// pool gets a PVC and a worker Deployment pinned to each node the
// workload selects, re-applied without error once the PVC is bound and
// extended to a node joining the placement; a pool removed has its
// StorageClass, PVCs and workers pruned; deleting the CR removes everything, the
// cluster-scoped CSIDriver, StorageClasses and VolumeSnapshotClass included.
// The native CR opens the snapshot-controller role's gate; its deletion
// ends the manager with operand.ErrRoleGone.
func TestOperator(t *testing.T) {
	e, c := controlplane.StartWithControllerManagerForTest(t, "daemonset-controller", "garbage-collector-controller")
	scheme := c.Scheme()
	crdtest.Install(t, c, "hostpathprovisioners", "volumesnapshotclasses")
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"kubernetes.io/os": "linux"}}}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, node} {
		must(t, c.Create(ctx, o))
	}
	// The API server taints a new Node not-ready until a kubelet reports;
	// none runs here: lift it as the node lifecycle controller would.
	node.Spec.Taints = nil
	must(t, c.Update(ctx, node))

	engine, err := graph.NewEngine()
	must(t, err)
	o := operand.DefaultOptions()
	o.Images, o.Namespace, o.Version = map[string]string{"node": "registry.local/converge-node:test"}, ns, "v-test"
	o.Poll, o.WaitTimeout, o.SkipNameValidation = 200*time.Millisecond, 30*time.Second, true
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	must(t, err)
	gates, err := hppoperator.Setup(mgr, engine, o)
	must(t, err)
	mctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()

	hpp := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "hostpath-provisioner", "annotations": map[string]any{operand.NativeAnnotation: operand.Native}},
		"spec": map[string]any{"workload": map[string]any{"nodeSelector": map[string]any{"kubernetes.io/os": "linux"}},
			"storagePools": []any{map[string]any{"name": "local", "path": "/var/hpvolumes"}}},
	}}
	hpp.SetGroupVersionKind(hppoperator.GVK)
	must(t, c.Create(ctx, hpp))
	// The native CR opens the snapshot controller's gate.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := gates.Wait(wctx, hppoperator.RoleSnapshotController); err != nil {
		t.Fatalf("the snapshot-controller role's gate did not open with a native HostPathProvisioner: %v", err)
	}
	wait := func(what string, ok func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(hppoperator.GVK)
			err := c.Get(ctx, client.ObjectKeyFromObject(hpp), u)
			if err == nil && ok(u) {
				return u
			}
			if time.Now().After(deadline) {
				st, _, _ := unstructured.NestedMap(u.Object, "status")
				t.Fatalf("HostPathProvisioner: %s not reached in 1m (get: %v); status %v", what, err, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	start := time.Now()
	got := wait("Progressing on the driver's pending pod", func(u *unstructured.Unstructured) bool {
		p := condition(u, "Progressing")
		return strings.Contains(p, "True DeploymentInProgress: Deploying version v-test: DaemonSet converge-system/hostpath-provisioner-csi: 0 of 1 pods ready, pod hostpath-provisioner-csi-") &&
			strings.Contains(p, "not scheduled to a node yet")
	})
	t.Logf("HostPathProvisioner Progressing on the driver's pod %s after its creation", time.Since(start).Round(time.Millisecond))
	if a, d := condition(got, "Available"), condition(got, "Degraded"); !strings.HasPrefix(a, "False") || !strings.HasPrefix(d, "False") {
		t.Errorf("Available = %s, Degraded = %s; want both False while the pod does not run", a, d)
	}
	for field, want := range map[string]any{"phase": "Deploying", "operatorVersion": "v-test", "targetVersion": "v-test"} {
		if v, _, _ := unstructured.NestedFieldNoCopy(got.Object, "status", field); v != want {
			t.Errorf("status.%s = %v, want %v", field, v, want)
		}
	}
	roles := []client.Object{
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt.io.hostpath-provisioner"}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-csi-local"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hostpath-provisioner-admin-csi"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-provisioner-admin-csi"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-provisioner-admin-csi"}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hostpath-provisioner-csi"}},
		snapshotClass(),
	}
	for _, o := range roles {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Errorf("%T %s: %v", o, o.GetName(), err)
		}
	}
	ds := &appsv1.DaemonSet{}
	dsKey := types.NamespacedName{Namespace: ns, Name: "hostpath-provisioner-csi"}
	must(t, c.Get(ctx, dsKey, ds))
	args := ds.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--kubelet-registration", "--storage-pool=local=/var/hpvolumes"} {
		if !slices.Contains(args, want) {
			t.Errorf("driver args %v lack %s", args, want)
		}
	}
	if ds.Spec.Template.Spec.NodeSelector["kubernetes.io/os"] != "linux" || ds.Spec.Template.Labels["hostpath-provisioner-operator.converge.dev/name"] != "hostpath-provisioner" {
		t.Errorf("pod template: nodeSelector %v, labels %v", ds.Spec.Template.Spec.NodeSelector, ds.Spec.Template.Labels)
	}

	// A new pool: applied, generation 2 observed.
	must(t, c.Patch(ctx, hpp, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"storagePools":[{"name":"local","path":"/var/hpvolumes"},{"name":"fast","path":"/mnt/fast"}]}}`))))
	wait("generation 2 observed", func(u *unstructured.Unstructured) bool {
		g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return g == 2 && !strings.HasPrefix(condition(u, "Degraded"), "True")
	})
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return c.Get(ctx, dsKey, ds) == nil && slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--storage-pool=fast=/mnt/fast")
	})
	must(t, c.Get(ctx, types.NamespacedName{Name: "hostpath-csi-fast"}, &storagev1.StorageClass{}))

	// A pvcTemplate pool without a size: refused, nothing changes.
	must(t, c.Patch(ctx, hpp, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"storagePools":[{"name":"local","path":"/var/hpvolumes"},{"name":"fast","path":"/mnt/fast","pvcTemplate":{"accessModes":["ReadWriteOnce"]}}]}}`))))
	wait("Degraded naming the pvcTemplate", func(u *unstructured.Unstructured) bool {
		return strings.HasPrefix(condition(u, "Degraded"), "True UnsupportedConfiguration: spec.storagePools[1].pvcTemplate.resources.requests.storage: required")
	})
	must(t, c.Get(ctx, dsKey, ds))
	if !slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--storage-pool=fast=/mnt/fast") {
		t.Errorf("driver args changed by a refused CR: %v", ds.Spec.Template.Spec.Containers[0].Args)
	}

	// A pvcTemplate pool (no storageClassName: the default class's,
	// which the API server's admission writes): a PVC and a worker
	// Deployment pinned to node-1, the one selected node; none for
	// node-2, which the nodeSelector leaves out; the driver keeps the
	// pool in <path>/csi.
	must(t, c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard",
		Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "example.com/none"}))
	must(t, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{"kubernetes.io/os": "windows"}}}))
	must(t, c.Patch(ctx, hpp, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"storagePools":[{"name":"local","path":"/var/hpvolumes"},{"name":"fast","path":"/mnt/fast","pvcTemplate":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"10Gi"}}}}]}}`))))
	pvcKey := types.NamespacedName{Namespace: ns, Name: "hpp-pool-fast-node-1"}
	pvc := &corev1.PersistentVolumeClaim{}
	worker := &appsv1.Deployment{}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return c.Get(ctx, pvcKey, pvc) == nil && c.Get(ctx, pvcKey, worker) == nil
	})
	if got := pvc.Spec.Resources.Requests.Storage().String(); got != "10Gi" || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "standard" {
		t.Errorf("pool PVC: storage %s, class %v; want 10Gi of the default class standard", got, pvc.Spec.StorageClassName)
	}
	pod := worker.Spec.Template.Spec
	terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchFields) != 1 || terms[0].MatchFields[0].Key != "metadata.name" || !slices.Equal(terms[0].MatchFields[0].Values, []string{"node-1"}) {
		t.Errorf("worker not pinned to node-1: %+v", terms)
	}
	if c := pod.Containers[0]; !slices.Equal(c.Command, []string{"converge-node", "hostpath-pool-mounter"}) || !slices.Contains(c.Args, "--target=/mnt/fast/csi") {
		t.Errorf("worker container: command %v args %v", c.Command, c.Args)
	}
	if v := pod.Volumes[0]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != pvcKey.Name {
		t.Errorf("worker's first volume %+v, want the PVC %s", v, pvcKey.Name)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hpp-pool-fast-node-2"}, &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
		t.Errorf("a PVC for node-2, which the workload does not select: %v", err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return c.Get(ctx, dsKey, ds) == nil && slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--storage-pool=fast=/mnt/fast/csi")
	})
	wait("Progressing on the worker", func(u *unstructured.Unstructured) bool {
		return strings.Contains(condition(u, "Progressing"), "hpp-pool-fast-node-1") && !strings.HasPrefix(condition(u, "Degraded"), "True")
	})
	// The PVC changes (bound, as the PV controller would write it): the
	// next derivation applies the same template again, which the API
	// server must accept (a PVC's spec is immutable but for its size).
	pvc.Status.Phase = corev1.ClaimBound
	must(t, c.Status().Update(ctx, pvc))
	// node-2 joins the placement: its worker is derived, node-1's PVC
	// re-applied without an error.
	node2 := &corev1.Node{}
	must(t, c.Get(ctx, types.NamespacedName{Name: "node-2"}, node2))
	node2.Labels["kubernetes.io/os"] = "linux"
	must(t, c.Update(ctx, node2))
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hpp-pool-fast-node-2"}, &appsv1.Deployment{}) == nil
	})
	got = wait("node-2's worker applied", func(u *unstructured.Unstructured) bool {
		return strings.Contains(condition(u, "Progressing"), "hpp-pool-fast-node-2") || strings.HasPrefix(condition(u, "Degraded"), "True")
	})
	if d := condition(got, "Degraded"); strings.HasPrefix(d, "True") {
		t.Fatalf("re-applying the pool PVC failed: Degraded = %s", d)
	}
	must(t, c.Get(ctx, pvcKey, pvc))
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "standard" {
		t.Errorf("pool PVC after a re-derivation: phase %s, class %v", pvc.Status.Phase, pvc.Spec.StorageClassName)
	}
	roles = append(roles,
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hpp-pool-fast-node-1"}})

	// The pool removed: its StorageClass and node-2's worker are pruned;
	// the pool PVCs stay with the volumes they hold, as upstream never
	// deletes them.
	must(t, c.Patch(ctx, hpp, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"storagePools":[{"name":"local","path":"/var/hpvolumes"}]}}`))))
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, types.NamespacedName{Name: "hostpath-csi-fast"}, &storagev1.StorageClass{})) &&
			apierrors.IsNotFound(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hpp-pool-fast-node-2"}, &appsv1.Deployment{}))
	})
	for _, name := range []string{"hpp-pool-fast-node-1", "hpp-pool-fast-node-2"} {
		p := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p); err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pool PVC %s after the pool was removed: %v (deleting: %v), want it kept", name, err, p.DeletionTimestamp != nil)
		}
	}

	// Deletion removes everything derived, cluster-scoped objects too.
	must(t, c.Delete(ctx, hpp))
	controlplane.Eventually(t, time.Minute, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(hpp), hpp.DeepCopy()))
	})
	for _, o := range roles {
		if !gone(ctx, c, o) {
			t.Errorf("%T %s left after the HostPathProvisioner was deleted", o, o.GetName())
		}
	}
	if err := c.Get(ctx, pvcKey, &corev1.PersistentVolumeClaim{}); err != nil {
		t.Errorf("pool PVC %s after the HostPathProvisioner was deleted: %v, want it kept", pvcKey, err)
	}
	// The last native HostPathProvisioner gone, the snapshot-controller
	// role ends the manager (converge-controller restarts without it).
	select {
	case err := <-done:
		if !errors.Is(err, operand.ErrRoleGone) {
			t.Errorf("manager ended with %v, want ErrRoleGone", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the manager still runs after the last native HostPathProvisioner went")
	}
}

// snapshotClass names the driver's VolumeSnapshotClass hostpath-csi.
func snapshotClass() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("snapshot.storage.k8s.io/v1")
	u.SetKind("VolumeSnapshotClass")
	u.SetName("hostpath-csi")
	return u
}

// gone reports whether o is not found or being deleted (a PVC waits for
// its finalizer kubernetes.io/pvc-protection, which no controller here
// removes).
func gone(ctx context.Context, c client.Client, o client.Object) bool {
	err := c.Get(ctx, client.ObjectKeyFromObject(o), o)
	return apierrors.IsNotFound(err) || (err == nil && o.GetDeletionTimestamp() != nil)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
