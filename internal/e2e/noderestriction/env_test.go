package noderestriction_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
)

// The namespace of the agents (the HyperConverged's, where the native
// operators put the node roles), the two nodes and the namespace of the
// VMIs.
const (
	ns    = "kubevirt-hyperconverged"
	nodeA = "node-a"
	nodeB = "node-b"
	vmNS  = "vms"
)

// The agents' ServiceAccounts, as components/virt, cnao, cdi and hpp name
// them.
const (
	vmAgent      = "converge-vm-agent"
	bridgeMarker = "converge-bridge-marker"
	cdiImporter  = "converge-cdi-importer"
	hostpathCSI  = "hostpath-provisioner-admin-csi"
)

// env is a control plane with the node roles' RBAC and policies applied
// and two Nodes registered as a kubelet registers them.
type env struct {
	cp     *controlplane.Env
	admin  client.Client
	cs     kubernetes.Interface
	scheme *runtime.Scheme
}

// start starts the control plane, installs the VMI and
// VolumeSnapshotContent CRDs, creates the
// namespaces and nodeA and nodeB (with a kubelet's label, kubeletVersion
// and Ready condition) and applies the roles' ServiceAccounts,
// ClusterRoles, ClusterRoleBindings and node restriction policies.
func start(t *testing.T) *env {
	t.Helper()
	controlplane.RequireForTest(t)
	ctrllog.SetLogger(logr.Discard()) // the agent's caches log through it
	cp, admin, scheme := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme)
	crdtest.Install(t, admin, "virtualmachineinstances", "volumesnapshotcontents")
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []string{ns, vmNS} {
		must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	for _, n := range []string{nodeA, nodeB} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}}
		must(t, admin.Create(ctx, node))
		node.Status = corev1.NodeStatus{
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.1"},
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("4")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		}
		must(t, admin.Status().Update(ctx, node))
	}
	for _, o := range roles(t) {
		if err := admin.Patch(ctx, o, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil { //nolint:staticcheck // as crdtest applies
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	return &env{cp: cp, admin: admin, cs: cs, scheme: scheme}
}

// applied are the kinds of the roles' objects start applies: what the
// agents' requests are judged by.
var applied = map[string]bool{
	"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
}

// roles renders the roles of a native KubeVirt, NetworkAddonsConfig (with
// linuxBridge), CDI and HostPathProvisioner (one pool) in ns with the
// graph engine, as the operators derive them, and gives the objects of
// the applied kinds. It fails t unless each kind gives one policy.
func roles(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	native := map[string]any{"converge.dev/operator": "native"}
	pools := []any{map[string]any{"name": "local", "path": "/var/hpvolumes"}}
	crs := []struct {
		cr     map[string]any
		inputs map[string]any
	}{
		{map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
			"metadata": map[string]any{"name": "kubevirt-kubevirt-hyperconverged", "namespace": ns, "annotations": native}},
			map[string]any{"pools": pools}},
		{map[string]any{"apiVersion": "networkaddonsoperator.network.kubevirt.io/v1", "kind": "NetworkAddonsConfig",
			"metadata": map[string]any{"name": "cluster", "annotations": native}, "spec": map[string]any{"linuxBridge": map[string]any{}}}, nil},
		{map[string]any{"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDI",
			"metadata": map[string]any{"name": "cdi-kubevirt-hyperconverged", "annotations": native}},
			map[string]any{"pools": pools, "uploadKeysNamespace": "converge-system"}},
		{map[string]any{"apiVersion": "hostpathprovisioner.kubevirt.io/v1beta1", "kind": "HostPathProvisioner",
			"metadata": map[string]any{"name": "hostpath-provisioner", "annotations": native}, "spec": map[string]any{"storagePools": pools}}, nil},
	}
	var out []*unstructured.Unstructured
	for _, c := range crs {
		cr := &unstructured.Unstructured{Object: c.cr}
		r, err := e.Roles(cr.GetKind(), cr, graph.RoleInputs{Namespace: ns, Images: map[string]string{"node": "registry.invalid/converge-node:test"}, Inputs: c.inputs})
		if err != nil {
			t.Fatalf("roles of %s: %v", cr.GetKind(), err)
		}
		if len(r.Refusals) > 0 {
			t.Fatalf("roles of %s: refusals %v", cr.GetKind(), r.Refusals)
		}
		policies := 0
		for _, o := range r.Objects {
			if applied[o.GetKind()] {
				out = append(out, o)
			}
			if o.GetKind() == "ValidatingAdmissionPolicy" {
				policies++
			}
		}
		if policies != 1 {
			t.Fatalf("roles of %s give %d ValidatingAdmissionPolicies, want 1", cr.GetKind(), policies)
		}
	}
	return out
}

// agent gives a client acting as ServiceAccount sa with a token bound to a
// Pod of sa on node (created here, as the DaemonSet's Pod on that node),
// as the kubelet mounts it, and the client's rest.Config. With node "" the
// token is bound to nothing, so its user names no node.
func (e *env) agent(t *testing.T, sa, node string) (client.Client, *rest.Config) {
	t.Helper()
	ctx := context.Background()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}
	if node != "" {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-" + node},
			Spec: corev1.PodSpec{ServiceAccountName: sa, NodeName: node,
				Containers: []corev1.Container{{Name: "agent", Image: "registry.invalid/converge-node:test"}}},
		}
		must(t, e.admin.Create(ctx, pod))
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tok, err := e.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s on %q: %v", sa, node, err)
	}
	cfg := rest.AnonymousClientConfig(e.cp.Config)
	cfg.BearerToken = tok.Status.Token
	c, err := client.New(cfg, client.Options{Scheme: e.scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

// enforced waits until do's error contains want: until the API server's
// RBAC and policy informers have what start applied.
func enforced(t *testing.T, want string, do func() error) {
	t.Helper()
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err = do(); err != nil && contains(err.Error(), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not enforced within 30s: got %v, want an error containing %q", err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
