package operand_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/operators/operand"
)

// workloadControllers are the kube-controller-manager controllers a
// native operator's roles need on a cluster: the DaemonSet controller
// creates the pods (no kubelet runs them here), the garbage collector
// deletes them with their DaemonSet.
var workloadControllers = []string{"daemonset-controller", "garbage-collector-controller"}

const ns = "kubevirt-hyperconverged"

var (
	kvGVK = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "KubeVirt"}
	kvKey = types.NamespacedName{Namespace: ns, Name: "kubevirt-kubevirt-hyperconverged"}
)

// testOperator is an operator of KubeVirt CRs built from the framework
// alone, with the component's real roles (components/virt #Roles) and one
// role gate.
func testOperator() operand.Operator {
	return operand.Operator{
		Name: "test-operator", GVK: kvGVK, CRD: "kubevirts.kubevirt.io",
		Status: operand.StatusFields{Phase: "phase", OperatorVersion: "operatorVersion",
			TargetVersion: "targetKubeVirtVersion", ObservedVersion: "observedKubeVirtVersion"},
		Roles: []operand.Role{{Name: "test-role"}},
	}
}

// env is an API server with kube-controller-manager, the KubeVirt CRD and
// the cluster instancetype and preference CRDs (the roles apply the common
// ones), the namespace and one Node (no kubelet).
func env(t *testing.T) (*controlplane.Env, client.Client, *runtime.Scheme) {
	e, _ := controlplane.StartWithControllerManagerForTest(t, workloadControllers...)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	crdtest.Install(t, c, "kubevirts", "virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences")
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"kubernetes.io/os": "linux"}}}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, node} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The API server taints a new Node node.kubernetes.io/not-ready
	// (NoSchedule), which DaemonSet pods do not tolerate; the node
	// lifecycle controller lifts it once a kubelet reports the Node Ready.
	// No kubelet runs here: lift it as it would.
	node.Spec.Taints = nil
	if err := c.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	return e, c, scheme
}

// run starts a manager with the test operator (made a Singleton when
// singleton) and gives its gates and a channel that receives what the
// manager returned.
func run(t *testing.T, e *controlplane.Env, scheme *runtime.Scheme, engine *graph.Engine, singleton ...bool) (*operand.Gates, <-chan error) {
	t.Helper()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	o := operand.DefaultOptions()
	o.Images = map[string]string{"node": "registry.local/converge-node:test"}
	o.Version, o.Poll, o.WaitTimeout, o.SkipNameValidation = "v-test", 200*time.Millisecond, 30*time.Second, true
	op := testOperator()
	op.Singleton = len(singleton) > 0 && singleton[0]
	gates, err := operand.Setup(mgr, engine, op, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	out := make(chan error, 1)
	stopped := make(chan struct{})
	go func() { err := <-done; out <- err; close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })
	return gates, out
}

func kubeVirt(selector map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
		"metadata": map[string]any{"name": kvKey.Name, "namespace": ns, "annotations": map[string]any{"converge.dev/operator": "native"}},
		"spec":     map[string]any{"workloads": map[string]any{"nodePlacement": map[string]any{"nodeSelector": selector}}},
	}}
	return u
}

func getKV(t *testing.T, c client.Client) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kvGVK)
	return u, c.Get(context.Background(), kvKey, u)
}

// condition gives the CR's condition typ as "Status Reason: message".
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
func waitCR(t *testing.T, c client.Client, what string, ok func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		u, err := getKV(t, c)
		if err == nil && ok(u) {
			return u
		}
		if time.Now().After(deadline) {
			st, _, _ := unstructured.NestedMap(u.Object, "status")
			t.Fatalf("KubeVirt: %s not reached in 1m (get: %v); finalizers %v, status %v", what, err, u.GetFinalizers(), st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// roleObjects are what the KubeVirt roles apply, by kind and name.
var roleObjects = []client.Object{
	&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "converge-vm-agent"}},
	&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "converge-vm-agent"}},
	&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "converge-vm-agent"}},
	&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "converge-vm-agent"}},
	&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "converge-vm-agent-auth-delegator"}},
	&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "converge-test-operator-kubevirt-kubevirt-hyperconverged"}},
}

// TestOperator runs the framework on a real API server with
// kube-controller-manager: the DaemonSet controller creates the VM
// agent's pod, no kubelet runs it, so the KubeVirt CR truthfully reads
// Progressing, not Available, naming the DaemonSet and the pod; a spec
// change is applied and observed; a CR the roles cannot take is Degraded
// without touching what runs; deleting the CR removes everything derived,
// and the last CR gone ends the manager with ErrRoleGone.
func TestOperator(t *testing.T) {
	e, c, scheme := env(t)
	engine, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	gates, done := run(t, e, scheme, engine)
	ctx := context.Background()
	if err := c.Create(ctx, kubeVirt(map[string]any{"kubernetes.io/os": "linux"})); err != nil {
		t.Fatal(err)
	}

	// The agent's pods use the PriorityClass the graph's virt component
	// applies; without it the API server refuses them, and the DaemonSet
	// controller says so in an event.
	waitCR(t, c, "Degraded naming the missing PriorityClass", func(u *unstructured.Unstructured) bool {
		return strings.HasPrefix(condition(u, "Degraded"), "True ComponentFailing: DaemonSet kubevirt-hyperconverged/converge-vm-agent: no pod created: FailedCreate:") &&
			strings.Contains(condition(u, "Degraded"), "kubevirt-cluster-critical")
	})
	if err := c.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-cluster-critical"}, Value: 1000000000}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cr := waitCR(t, c, "Progressing with the pod not scheduled", func(u *unstructured.Unstructured) bool {
		return strings.Contains(condition(u, "Progressing"), "True DeploymentInProgress: Deploying version v-test: DaemonSet kubevirt-hyperconverged/converge-vm-agent: 0 of 1 pods ready, pod converge-vm-agent-") &&
			strings.Contains(condition(u, "Progressing"), "Pending: not scheduled to a node yet")
	})
	t.Logf("KubeVirt Progressing with the agent's pod named %s after the PriorityClass", time.Since(start).Round(time.Millisecond))
	if got := condition(cr, "Available"); !strings.HasPrefix(got, "False DeploymentInProgress") {
		t.Errorf("Available = %s", got)
	}
	if got := condition(cr, "Degraded"); !strings.HasPrefix(got, "False") {
		t.Errorf("Degraded = %s", got)
	}
	for field, want := range map[string]any{"phase": "Deploying", "operatorVersion": "v-test", "targetKubeVirtVersion": "v-test", "observedGeneration": cr.GetGeneration()} {
		if got, _, _ := unstructured.NestedFieldNoCopy(cr.Object, "status", field); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("status.%s = %v, want %v", field, got, want)
		}
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(cr.Object, "status", "observedKubeVirtVersion"); found {
		t.Error("observedKubeVirtVersion set before anything was ready")
	}
	if fs := cr.GetFinalizers(); len(fs) != 1 || fs[0] != "test-operator.converge.dev/roles" {
		t.Errorf("finalizers %v", fs)
	}
	for _, o := range roleObjects {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Errorf("%T %s: %v", o, o.GetName(), err)
		}
	}
	ds := &appsv1.DaemonSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "converge-vm-agent"}, ds); err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{"test-operator.converge.dev/name": kvKey.Name, "test-operator.converge.dev/namespace": ns}
	for k, v := range owner {
		if ds.Labels[k] != v || ds.Spec.Template.Labels[k] != v {
			t.Errorf("owner label %s: DaemonSet %q, pod template %q, want %q", k, ds.Labels[k], ds.Spec.Template.Labels[k], v)
		}
	}
	if got := ds.Spec.Template.Spec.Containers[0].Image; got != "registry.local/converge-node:test" {
		t.Errorf("image %s", got)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := gates.Wait(wctx, "test-role"); err != nil {
		t.Errorf("gate of test-role: %v", err)
	}
	cancel()

	// A spec change: the DaemonSet follows, and no node matches it.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"workloads":{"nodePlacement":{"nodeSelector":{"kubevirt":"yes"}}}}}`))
	if err := c.Patch(ctx, cr, patch); err != nil {
		t.Fatal(err)
	}
	waitCR(t, c, "generation 2 observed, no node to run on", func(u *unstructured.Unstructured) bool {
		g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return g == u.GetGeneration() && u.GetGeneration() == 2 && strings.Contains(condition(u, "Progressing"), "no node to run on")
	})

	// A CR the roles cannot take: Degraded, nothing applied.
	patch = client.RawPatch(types.MergePatchType, []byte(`{"spec":{"imagePullPolicy":"Sometimes"}}`))
	if err := c.Patch(ctx, cr, patch); err != nil {
		t.Fatal(err)
	}
	waitCR(t, c, "Degraded DeploymentFailed naming spec.imagePullPolicy", func(u *unstructured.Unstructured) bool {
		return strings.HasPrefix(condition(u, "Degraded"), "True DeploymentFailed: deriving the roles: KubeVirt kubevirt-hyperconverged/kubevirt-kubevirt-hyperconverged: spec.imagePullPolicy")
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(ds), ds); err != nil || ds.Spec.Template.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("DaemonSet after a refused CR: %v, pull policy %s", err, ds.Spec.Template.Spec.Containers[0].ImagePullPolicy)
	}

	// Deleting the CR removes every object derived and the inventory,
	// then the CR; the last CR gone ends the manager.
	if err := c.Delete(ctx, cr); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, time.Minute, func() bool {
		_, err := getKV(t, c)
		return apierrors.IsNotFound(err)
	})
	for _, o := range roleObjects {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s left after the CR was deleted: %v", o, o.GetName(), err)
		}
	}
	select {
	case err := <-done:
		if !errors.Is(err, operand.ErrRoleGone) || !strings.Contains(err.Error(), "test-role") {
			t.Errorf("manager ended with %v, want ErrRoleGone naming test-role", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the manager still runs after the last KubeVirt went")
	}
}

// TestOperatorLeavesExternalCRs: a CR that leaves native mode has its
// roles removed, the status the operator wrote removed and the finalizer
// dropped, and stays; a CR marked external from the start is never
// touched.
func TestOperatorLeavesExternalCRs(t *testing.T) {
	e, c, scheme := env(t)
	engine, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	_, done := run(t, e, scheme, engine)
	ctx := context.Background()
	cr := kubeVirt(map[string]any{"kubernetes.io/os": "linux"})
	if err := c.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	waitCR(t, c, "deployed", func(u *unstructured.Unstructured) bool {
		return len(u.GetFinalizers()) == 1 && condition(u, "Progressing") != ""
	})
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"converge.dev/operator":"external"}}}`))
	if err := c.Patch(ctx, cr, patch); err != nil {
		t.Fatal(err)
	}
	u := waitCR(t, c, "finalizer removed", func(u *unstructured.Unstructured) bool { return len(u.GetFinalizers()) == 0 })
	for _, o := range roleObjects {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s left after the CR went external: %v", o, o.GetName(), err)
		}
	}
	// What the operator reported described roles that no longer run: its
	// status fields are gone, for the upstream operator to write.
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	if conds, found, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); len(st) != 1 || !found || len(conds) != 0 {
		t.Errorf("the CR kept the status the native operator wrote: %v", st)
	}
	select {
	case err := <-done:
		if !errors.Is(err, operand.ErrRoleGone) {
			t.Errorf("manager ended with %v, want ErrRoleGone", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the manager still runs after the last native KubeVirt went external")
	}
}

// TestOperatorSingleton: of two native CRs of a singleton kind the older
// is deployed; the other reads Degraded ExistingDeployment naming it, and
// is deployed once the first is gone.
func TestOperatorSingleton(t *testing.T) {
	e, c, scheme := env(t)
	engine, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	run(t, e, scheme, engine, true)
	ctx := context.Background()
	first := kubeVirt(map[string]any{"kubernetes.io/os": "linux"})
	if err := c.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitCR(t, c, "deployed", func(u *unstructured.Unstructured) bool { return condition(u, "Progressing") != "" })
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}); err != nil {
		t.Fatal(err)
	}
	second := kubeVirt(map[string]any{"kubernetes.io/os": "linux"})
	second.SetNamespace("other")
	if err := c.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(second)
	get := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kvGVK)
		_ = c.Get(ctx, key, u)
		return u
	}
	controlplane.Eventually(t, time.Minute, func() bool {
		return strings.HasPrefix(condition(get(), "Degraded"), "True ExistingDeployment: KubeVirt kubevirt-hyperconverged/kubevirt-kubevirt-hyperconverged is deployed already")
	})
	ds := &appsv1.DaemonSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "other", Name: "converge-vm-agent"}, ds); !apierrors.IsNotFound(err) {
		t.Errorf("the second KubeVirt's agent was applied: %v", err)
	}
	if err := c.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for c.Get(ctx, client.ObjectKey{Namespace: "other", Name: "converge-vm-agent"}, ds) != nil {
		if time.Now().After(deadline) {
			st, _, _ := unstructured.NestedMap(get().Object, "status")
			_, err := getKV(t, c)
			t.Fatalf("the second KubeVirt was not deployed after the first was deleted (first: %v); its status: %v", err, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
