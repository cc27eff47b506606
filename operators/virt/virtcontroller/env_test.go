package virtcontroller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller"
)

// env is a real API server with the engine's VM CRDs installed and the
// virt-controller role's controllers running in a manager.
type env struct {
	c  client.Client
	ns string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cp, c, scheme := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme)
	ctx := context.Background()
	crdtest.Install(t, c, "virtualmachines", "virtualmachineinstances")
	opts := virtcontroller.DefaultOptions()
	opts.CRDPoll = 100 * time.Millisecond
	opts.SkipNameValidation = true
	controlplane.RunManagerForTest(t, cp, scheme, func(mgr ctrl.Manager) error { return virtcontroller.Setup(mgr, opts) })
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
