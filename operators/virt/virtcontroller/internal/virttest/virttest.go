// Package virttest is the test bed of the virt-controller role's
// controllers (operators/virt/virtcontroller and its vm, scheduler and
// nodehealth packages): a real API server with the engine's VM CRDs
// installed and a manager running the controllers a test sets up (New),
// the cluster's side of a test (agent nodes: Node, AddNode; VMs and VMIs:
// CreateVM, VMISpec; claims and their volumes: PVC, PV, Bind,
// CreateBound), the node agent's (SetPhase) and the storage roles'
// (DataVolumeDone, SetDataVolumeStatus). For tests only.
package virttest

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
)

// Namespace is the namespace the tests' VMs and VMIs live in.
const Namespace = "vms"

// Env is a real API server with the engine's VM CRDs installed and
// controllers running in a manager.
type Env struct {
	// C is a client of the API server (uncached).
	C client.Client
	// NS is Namespace, created by New.
	NS string
}

// New starts a kube-apiserver and etcd for t (skipping t when bin/ lacks
// them), installs the engine's VirtualMachine, VirtualMachineInstance and
// DataVolume CRDs, runs a manager whose scheme knows kubevirt.io/v1 and
// cdi.kubevirt.io/v1beta1 with setups
// registering the controllers under test, and creates Namespace.
func New(t *testing.T, setups ...func(ctrl.Manager) error) *Env {
	t.Helper()
	cp, c, scheme := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme, cdiv1.AddToScheme)
	ctx := context.Background()
	crdtest.Install(t, c, "virtualmachines", "virtualmachineinstances", "datavolumes")
	controlplane.RunManagerForTest(t, cp, scheme, setups...)
	e := &Env{C: c, NS: Namespace}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.NS}}); err != nil {
		t.Fatal(err)
	}
	return e
}

// VM gives the VirtualMachine name; it fails t when there is none.
func (e *Env) VM(t *testing.T, name string) *kubevirtv1.VirtualMachine {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{}
	if err := e.C.Get(context.Background(), types.NamespacedName{Namespace: e.NS, Name: name}, vm); err != nil {
		t.Fatalf("VirtualMachine %s: %v", name, err)
	}
	return vm
}

// VMI gives the VMI name, or nil if there is none.
func (e *Env) VMI(t *testing.T, name string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := e.C.Get(context.Background(), types.NamespacedName{Namespace: e.NS, Name: name}, vmi); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		t.Fatalf("VirtualMachineInstance %s: %v", name, err)
	}
	return vmi
}

// SetPhase writes the VMI's phase (and Ready) as the node agent would,
// and gives the VMI's UID.
func (e *Env) SetPhase(t *testing.T, name string, p kubevirtv1.VirtualMachineInstancePhase) types.UID {
	t.Helper()
	var uid types.UID
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vmi := e.VMI(t, name)
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
		return e.C.Status().Update(context.Background(), vmi) == nil
	})
	return uid
}

// CreateVM creates the VirtualMachine name with run strategy s and a
// template of 64 MiB guest memory.
func (e *Env) CreateVM(t *testing.T, name string, s kubevirtv1.VirtualMachineRunStrategy) {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &s, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
				Memory: &kubevirtv1.Memory{Guest: resource.NewQuantity(64<<20, resource.BinarySI)}}}}},
	}
	if err := e.C.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
}

// AddNode creates n with its status (allocatable, Ready).
func (e *Env) AddNode(t *testing.T, n corev1.Node) {
	t.Helper()
	ctx := context.Background()
	st := n.Status
	if err := e.C.Create(ctx, &n); err != nil {
		t.Fatal(err)
	}
	// The API server's TaintNodesByCondition admission taints a new node
	// not-ready; the node lifecycle controller (not running here) lifts it
	// once the node is Ready: do that.
	taints := n.Spec.Taints[:0]
	for _, tn := range n.Spec.Taints {
		if tn.Key != corev1.TaintNodeNotReady {
			taints = append(taints, tn)
		}
	}
	n.Spec.Taints = taints
	if err := e.C.Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
	n.Status = st
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := e.C.Status().Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
}

// Node gives a Node name running the VM agent (label
// v1alpha1.AgentLabel=true, besides labels) with taints and allocatable
// cpu and mem.
func Node(name, cpu, mem string, labels map[string]string, taints ...corev1.Taint) corev1.Node {
	l := map[string]string{v1alpha1.AgentLabel: "true"}
	for k, v := range labels {
		l[k] = v
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}
}

// VMISpec gives a VMI in Namespace named "v"+mem (lower case) with guest
// memory mem, node selector sel and tolerations tol.
func VMISpec(mem string, sel map[string]string, tol ...corev1.Toleration) *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "v" + strings.ToLower(mem)},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{NodeSelector: sel, Tolerations: tol,
			Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: ptrQ(resource.MustParse(mem))}}}}
}

func ptrQ(q resource.Quantity) *resource.Quantity { return &q }
