package vm_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// step: optionally set the VMI's phase (as the agent would) or the VM's
// run strategy, then expect the VMI to exist or not (recreated: with a new
// UID), and the VM's printableStatus.
type step struct {
	phase       kubevirtv1.VirtualMachineInstancePhase
	strategy    kubevirtv1.VirtualMachineRunStrategy
	wantVMI     bool
	recreated   bool
	wantStatus  kubevirtv1.VirtualMachinePrintableStatus
	wantReady   bool
	wantHaltedS bool // spec.runStrategy became Halted (Once)
}

func TestRunStrategy(t *testing.T) {
	e := newEnv(t)
	ptr := func(s kubevirtv1.VirtualMachineRunStrategy) *kubevirtv1.VirtualMachineRunStrategy { return &s }
	yes := true
	// No node runs the agent: a created VMI stays Pending, Unschedulable.
	tests := []struct {
		name     string
		strategy *kubevirtv1.VirtualMachineRunStrategy
		running  *bool
		steps    []step
	}{
		{"always", ptr(kubevirtv1.RunStrategyAlways), nil, []step{
			{wantVMI: true, wantStatus: kubevirtv1.VirtualMachineStatusUnschedulable},
			{phase: kubevirtv1.Scheduled, wantVMI: true, wantStatus: kubevirtv1.VirtualMachineStatusStarting},
			{phase: kubevirtv1.Running, wantVMI: true, wantStatus: kubevirtv1.VirtualMachineStatusRunning, wantReady: true},
			{phase: kubevirtv1.Failed, wantVMI: true, recreated: true},
			{phase: kubevirtv1.Succeeded, wantVMI: true, recreated: true},
			{strategy: kubevirtv1.RunStrategyHalted, wantVMI: false, wantStatus: kubevirtv1.VirtualMachineStatusStopped},
		}},
		{"rerun-on-failure", ptr(kubevirtv1.RunStrategyRerunOnFailure), nil, []step{
			{wantVMI: true},
			{phase: kubevirtv1.Failed, wantVMI: true, recreated: true},
			{phase: kubevirtv1.Succeeded, wantVMI: true, wantStatus: kubevirtv1.VirtualMachineStatusStopped},
		}},
		{"manual", ptr(kubevirtv1.RunStrategyManual), nil, []step{
			{wantVMI: false, wantStatus: kubevirtv1.VirtualMachineStatusStopped},
		}},
		{"halted", ptr(kubevirtv1.RunStrategyHalted), nil, []step{
			{wantVMI: false, wantStatus: kubevirtv1.VirtualMachineStatusStopped},
			{strategy: kubevirtv1.RunStrategyAlways, wantVMI: true},
			{phase: kubevirtv1.Running, wantVMI: true, wantStatus: kubevirtv1.VirtualMachineStatusRunning, wantReady: true},
			{strategy: kubevirtv1.RunStrategyHalted, wantVMI: false, wantStatus: kubevirtv1.VirtualMachineStatusStopped},
		}},
		{"once", ptr(kubevirtv1.RunStrategyOnce), nil, []step{
			{wantVMI: true},
			{phase: kubevirtv1.Running, wantVMI: true, wantStatus: kubevirtv1.VirtualMachineStatusRunning, wantReady: true},
			{phase: kubevirtv1.Succeeded, wantVMI: false, wantStatus: kubevirtv1.VirtualMachineStatusStopped, wantHaltedS: true},
		}},
		{"legacy-running", nil, &yes, []step{
			{wantVMI: true, wantStatus: kubevirtv1.VirtualMachineStatusUnschedulable},
		}},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm := &kubevirtv1.VirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: tt.name},
				Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: tt.strategy, Running: tt.running,
					Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": tt.name}},
						Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
							Memory: &kubevirtv1.Memory{Guest: resource.NewQuantity(64<<20, resource.BinarySI)}}}}},
			}
			if err := e.C.Create(ctx, vm); err != nil {
				t.Fatal(err)
			}
			var uid types.UID
			for i, s := range tt.steps {
				if s.phase != "" {
					uid = e.SetPhase(t, tt.name, s.phase)
				}
				if s.strategy != "" {
					cur := e.VM(t, tt.name)
					p := client.MergeFrom(cur.DeepCopy())
					cur.Spec.RunStrategy = ptr(s.strategy)
					if err := e.C.Patch(ctx, cur, p); err != nil {
						t.Fatal(err)
					}
				}
				start := time.Now()
				var last string
				controlplane.Eventually(t, 30*time.Second, func() bool {
					vmi, vm := e.VMI(t, tt.name), e.VM(t, tt.name)
					last = describe(vm, vmi)
					if (vmi != nil && vmi.DeletionTimestamp == nil) != s.wantVMI {
						return false
					}
					if vmi != nil && s.wantVMI {
						if s.recreated != (vmi.UID != uid && uid != "") {
							return false
						}
						// The VMI can be seen before the VM's status
						// (which names the strategy) is written: wait for
						// both to agree rather than fail on the window.
						if vmi.Annotations[v1alpha1.RunStrategyAnnotation] != string(vm.Status.RunStrategy) {
							return false
						}
						if vmi.Labels["app"] != tt.name || !metav1.IsControlledBy(vmi, vm) {
							t.Fatalf("step %d: VMI %s: annotation %q, labels %v, owners %v", i, tt.name,
								vmi.Annotations[v1alpha1.RunStrategyAnnotation], vmi.Labels, vmi.OwnerReferences)
						}
					}
					if s.wantStatus != "" && vm.Status.PrintableStatus != s.wantStatus {
						return false
					}
					if s.wantHaltedS && (vm.Spec.RunStrategy == nil || *vm.Spec.RunStrategy != kubevirtv1.RunStrategyHalted) {
						return false
					}
					return vm.Status.Ready == s.wantReady && vm.Status.Created == s.wantVMI
				})
				t.Logf("step %d (%+v) reached in %v: %s", i, s, time.Since(start), last)
				if vmi := e.VMI(t, tt.name); vmi != nil {
					uid = vmi.UID
				}
			}
		})
	}
}

func describe(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) string {
	s := "vm " + string(vm.Status.PrintableStatus)
	if vmi == nil {
		return s + ", no vmi"
	}
	return s + ", vmi " + string(vmi.UID) + " " + string(vmi.Status.Phase)
}
