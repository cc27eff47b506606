package virtapi_test

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/client-go/kubevirt"
	kvcorev1 "kubevirt.io/client-go/kubevirt/typed/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/virtapitest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vm"
)

// cluster is a real API server with the VM CRDs, the virt-api registered
// as an aggregated API, converge's VM controller, KubeVirt's user roles as
// the virt component renders them, and users of client certificates.
type cluster struct {
	env *controlplane.Env
	c   client.Client
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	controlplane.RequireForTest(t)
	env, c, scheme := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme, cdiv1.AddToScheme)
	crdtest.Install(t, c, "virtualmachines", "virtualmachineinstances", "datavolumes")
	virtapitest.Start(t, env)
	controlplane.RunManagerForTest(t, env, scheme, func(m ctrl.Manager) error {
		return vm.SetupWithManager(m, vm.Options{Concurrency: 1, SkipNameValidation: true})
	})
	applyUserRoles(t, c)
	return &cluster{env: env, c: c}
}

// applyUserRoles applies the ClusterRoles and bindings named kubevirt.io:*
// that the virt operator derives from a KubeVirt CR (components/virt
// userroles.cue), as it would.
func applyUserRoles(t *testing.T, c client.Client) {
	t.Helper()
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	cr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
		"metadata": map[string]any{"name": "kubevirt", "namespace": "kubevirt"}}}
	roles, err := e.Roles("KubeVirt", cr, graph.RoleInputs{Namespace: "kubevirt", Images: map[string]string{"node": "n"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range roles.Objects {
		if k := o.GetKind(); (k == "ClusterRole" || k == "ClusterRoleBinding") && len(o.GetName()) > 12 && o.GetName()[:12] == "kubevirt.io:" {
			if err := c.Create(t.Context(), o); err != nil {
				t.Fatalf("%s %s: %v", k, o.GetName(), err)
			}
		}
	}
}

// user gives a rest.Config of a client-certificate user, bound in ns to
// clusterRole unless it is empty.
func (cl *cluster) user(t *testing.T, name, ns, clusterRole string) *rest.Config {
	t.Helper()
	return cl.authUser(t, name, ns, clusterRole).Config()
}

// authUser is user's client-certificate user itself (KubeConfig gives its
// kubeconfig file's bytes).
func (cl *cluster) authUser(t *testing.T, name, ns, clusterRole string) *envtest.AuthenticatedUser {
	t.Helper()
	u, err := cl.env.AddUser(envtest.User{Name: name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if clusterRole != "" {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}
		if err := cl.c.Create(t.Context(), rb); err != nil {
			t.Fatal(err)
		}
	}
	return u
}

// vms gives the VirtualMachine client of KubeVirt's generated clientset
// (kubevirt.io/client-go/kubevirt, whose Start, Stop and Restart kubecli
// calls too) for cfg.
func vms(t *testing.T, cfg *rest.Config, ns string) kvcorev1.VirtualMachineInterface {
	t.Helper()
	cs, err := kubevirt.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs.KubevirtV1().VirtualMachines(ns)
}

func (cl *cluster) createVM(t *testing.T, ns, name string, rs kubevirtv1.VirtualMachineRunStrategy) {
	t.Helper()
	v := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &rs, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}}}
	if err := cl.c.Create(t.Context(), v); err != nil {
		t.Fatal(err)
	}
}

func (cl *cluster) vm(t *testing.T, ns, name string) *kubevirtv1.VirtualMachine {
	t.Helper()
	v := &kubevirtv1.VirtualMachine{}
	if err := cl.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, v); err != nil {
		t.Fatal(err)
	}
	return v
}

// running waits until the VM's VMI exists (created by the VM controller)
// with another UID than not, and reports it Running on node-a, as the VM
// agent would; it gives the VMI's UID.
func (cl *cluster) running(t *testing.T, ns, name string, not types.UID) types.UID {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		err := cl.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, vmi)
		return err == nil && vmi.UID != not && vmi.DeletionTimestamp == nil
	})
	vmi.Status.Phase, vmi.Status.NodeName = kubevirtv1.Running, "node-a"
	if err := cl.c.Status().Update(t.Context(), vmi); err != nil {
		t.Fatal(err)
	}
	return vmi.UID
}

// wantStatus checks err is a StatusError with code and message, as
// KubeVirt's virt-api answers.
func wantStatus(t *testing.T, what string, err error, code int32, msg string) {
	t.Helper()
	se, ok := err.(apierrors.APIStatus)
	if !ok {
		t.Errorf("%s: %v (%T), want %d %q", what, err, err, code, msg)
		return
	}
	if s := se.Status(); s.Code != code || s.Message != msg {
		t.Errorf("%s: %d %q, want %d %q", what, s.Code, s.Message, code, msg)
	}
}

// TestLifecycle drives VMs through KubeVirt's start, stop and restart
// subresources with KubeVirt's own client as a client-certificate user
// bound to kubevirt.io:edit, against converge's VM controller: a Halted VM
// starts (runStrategy Always, a VMI), refuses a second start, restarts
// (Stop of its VMI then Start: a new VMI), stops (Halted, no VMI); a
// Manual VM gets state change requests and a stop's grace period lands on
// its VMI; the errors are KubeVirt's, and a user without the role (or
// with kubevirt.io:view) is refused by RBAC.
func TestLifecycle(t *testing.T) {
	cl := newCluster(t)
	ctx := context.Background()
	ns := "default"
	alice := vms(t, cl.user(t, "alice", ns, "kubevirt.io:edit"), ns)

	cl.createVM(t, ns, "testvm", kubevirtv1.RunStrategyHalted)
	if err := alice.Start(ctx, "testvm", &kubevirtv1.StartOptions{}); err != nil {
		t.Fatalf("start: %v", err)
	}
	if rs := *cl.vm(t, ns, "testvm").Spec.RunStrategy; rs != kubevirtv1.RunStrategyAlways {
		t.Errorf("after start: runStrategy %s, want Always", rs)
	}
	first := cl.running(t, ns, "testvm", "")
	wantStatus(t, "second start", alice.Start(ctx, "testvm", &kubevirtv1.StartOptions{}),
		409, `Operation cannot be fulfilled on virtualmachine.kubevirt.io "testvm": VM is already running`)
	wantStatus(t, "paused start", alice.Start(ctx, "testvm", &kubevirtv1.StartOptions{Paused: true}),
		409, `Operation cannot be fulfilled on virtualmachine.kubevirt.io "testvm": VM is already running`)

	// restart: Stop of the running VMI, then Start; the VM controller
	// replaces the VMI and empties the queue
	if err := alice.Restart(ctx, "testvm", &kubevirtv1.RestartOptions{}); err != nil {
		t.Fatalf("restart: %v", err)
	}
	second := cl.running(t, ns, "testvm", first)
	controlplane.Eventually(t, 30*time.Second, func() bool { return len(cl.vm(t, ns, "testvm").Status.StateChangeRequests) == 0 })
	t.Logf("restart replaced VMI %s by %s", first, second)
	one := int64(1)
	wantStatus(t, "restart with a grace period", alice.Restart(ctx, "testvm", &kubevirtv1.RestartOptions{GracePeriodSeconds: &one}),
		400, "For force restart, only gracePeriod=0 is supported for now")

	// stop: Halted, the VMI goes
	if err := alice.Stop(ctx, "testvm", &kubevirtv1.StopOptions{}); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if rs := *cl.vm(t, ns, "testvm").Spec.RunStrategy; rs != kubevirtv1.RunStrategyHalted {
		t.Errorf("after stop: runStrategy %s, want Halted", rs)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return apierrors.IsNotFound(cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "testvm"}, &kubevirtv1.VirtualMachineInstance{}))
	})
	wantStatus(t, "restart of a Halted VM", alice.Restart(ctx, "testvm", &kubevirtv1.RestartOptions{}),
		409, `Operation cannot be fulfilled on virtualmachine.kubevirt.io "testvm": RunStategy Halted does not support manual restart requests`)
	wantStatus(t, "stop of a stopped VM", alice.Stop(ctx, "testvm", &kubevirtv1.StopOptions{}),
		409, `Operation cannot be fulfilled on virtualmachine.kubevirt.io "testvm": VM is not running`)
	wantStatus(t, "start of a missing VM", alice.Start(ctx, "ghost", &kubevirtv1.StartOptions{}),
		404, `virtualmachine.kubevirt.io "ghost" not found`)

	// Manual: requests in status.stateChangeRequests; a dry run writes nothing
	cl.createVM(t, ns, "manual", kubevirtv1.RunStrategyManual)
	if err := alice.Start(ctx, "manual", &kubevirtv1.StartOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("dry-run start: %v", err)
	}
	if reqs := cl.vm(t, ns, "manual").Status.StateChangeRequests; len(reqs) != 0 {
		t.Errorf("after a dry-run start: stateChangeRequests %v", reqs)
	}
	if err := alice.Start(ctx, "manual", &kubevirtv1.StartOptions{}); err != nil {
		t.Fatalf("start of Manual: %v", err)
	}
	cl.running(t, ns, "manual", "")
	grace := int64(5)
	if err := alice.Stop(ctx, "manual", &kubevirtv1.StopOptions{GracePeriod: &grace}); err != nil {
		t.Fatalf("stop of Manual: %v", err)
	}
	v := cl.vm(t, ns, "manual")
	if rs := *v.Spec.RunStrategy; rs != kubevirtv1.RunStrategyManual {
		t.Errorf("Manual VM after stop: runStrategy %s", rs)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return apierrors.IsNotFound(cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "manual"}, &kubevirtv1.VirtualMachineInstance{}))
	})

	// RBAC: bob has no role, carol only kubevirt.io:view
	bob := vms(t, cl.user(t, "bob", ns, ""), ns)
	wantStatus(t, "bob's start", bob.Start(ctx, "testvm", &kubevirtv1.StartOptions{}), 403,
		`virtualmachines.subresources.kubevirt.io "testvm" is forbidden: User "bob" cannot update resource "virtualmachines/start" in API group "subresources.kubevirt.io" in the namespace "default"`)
	carol := vms(t, cl.user(t, "carol", ns, "kubevirt.io:view"), ns)
	wantStatus(t, "carol's stop", carol.Stop(ctx, "testvm", &kubevirtv1.StopOptions{}), 403,
		`virtualmachines.subresources.kubevirt.io "testvm" is forbidden: User "carol" cannot update resource "virtualmachines/stop" in API group "subresources.kubevirt.io" in the namespace "default"`)
	if rs := *cl.vm(t, ns, "testvm").Spec.RunStrategy; rs != kubevirtv1.RunStrategyHalted {
		t.Errorf("after refused requests: runStrategy %s, want Halted", rs)
	}
}
