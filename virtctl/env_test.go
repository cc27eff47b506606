package virtctl_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/graph"
	"github.com/converge-dev/converge/internal/controlplane"
	"github.com/converge-dev/converge/virtctl"
)

// env is a real API server with the engine's VM CRDs installed and the
// virtctl controllers running in a manager.
type env struct {
	c  client.Client
	ns string
}

func newEnv(t *testing.T) *env {
	t.Helper()
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
	_ = kubevirtv1.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	engine, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := engine.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	installed := 0
	for _, crd := range crds {
		if crd.Name != "virtualmachines" && crd.Name != "virtualmachineinstances" {
			continue
		}
		if err := c.Patch(ctx, crd.Object, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Fatalf("installing CRD %s: %v", crd.Name, err)
		}
		installed++
	}
	if installed != 2 {
		t.Fatalf("the engine generated %d of the 2 VM CRDs", installed)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return c.List(ctx, &kubevirtv1.VirtualMachineList{}) == nil && c.List(ctx, &kubevirtv1.VirtualMachineInstanceList{}) == nil
	})
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	opts := virtctl.DefaultOptions()
	opts.CRDPoll = 100 * time.Millisecond
	opts.SkipNameValidation = true
	if err := virtctl.Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	e := &env{c: c, ns: "vms"}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) vm(t *testing.T, name string) *kubevirtv1.VirtualMachine {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, vm); err != nil {
		t.Fatalf("VirtualMachine %s: %v", name, err)
	}
	return vm
}

// vmi gives the VMI name, or nil if there is none.
func (e *env) vmi(t *testing.T, name string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, vmi); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		t.Fatalf("VirtualMachineInstance %s: %v", name, err)
	}
	return vmi
}

// setPhase writes the VMI's phase (and Ready) as the node agent would.
func (e *env) setPhase(t *testing.T, name string, p kubevirtv1.VirtualMachineInstancePhase) types.UID {
	t.Helper()
	var uid types.UID
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vmi := e.vmi(t, name)
		if vmi == nil {
			return false
		}
		vmi.Status.Phase = p
		ready := corev1.ConditionFalse
		if p == kubevirtv1.Running {
			ready = corev1.ConditionTrue
		}
		vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceReady, Status: ready}}
		uid = vmi.UID
		return e.c.Status().Update(context.Background(), vmi) == nil
	})
	return uid
}
