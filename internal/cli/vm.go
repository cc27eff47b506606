package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// vmScheme holds the types the vm verbs read and write: client-go's and
// kubevirt.io/v1.
var vmScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// vmClient gives a client of the kubeconfig's cluster that knows
// kubevirt.io/v1.
func (g *globals) vmClient() (client.Client, error) {
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: vmScheme})
}

func newVM(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vm",
		Short: "Start, stop, restart a VirtualMachine or attach to its serial console (virtctl's verbs)",
	}
	cmd.AddCommand(newVMLifecycle(g, "start"), newVMLifecycle(g, "stop"), newVMLifecycle(g, "restart"), newVMConsole(g))
	return cmd
}

// newVMLifecycle builds `converge vm start|stop|restart NAME`.
func newVMLifecycle(g *globals, verb string) *cobra.Command {
	var ns string
	long := map[string]string{
		"start": `start runs a VirtualMachine as KubeVirt's start subresource does: a Halted VM
gets runStrategy Always; a Manual or RerunOnFailure VM gets a Start request in
status.stateChangeRequests (Stop then Start when its last VMI ended). Always
and Once VMs refuse manual starts; a VM whose VMI runs is "already running".`,
		"stop": `stop stops a VirtualMachine as KubeVirt's stop subresource does: an Always or
Once VM gets runStrategy Halted; a Manual or RerunOnFailure VM gets a Stop
request for its VMI in status.stateChangeRequests.`,
		"restart": `restart replaces a VirtualMachine's VMI as KubeVirt's restart subresource
does: Stop (of the current VMI) then Start in status.stateChangeRequests.
Halted and Once VMs refuse restarts.`,
	}[verb]
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a VirtualMachine (KubeVirt's " + verb + " subresource)",
		Long:  long,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.vmClient()
			if err != nil {
				return err
			}
			if err := changeVM(cmd.Context(), c, verb, ns, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "VM %s/%s was scheduled to %s\n", ns, args[0], verb)
			return nil
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "default", "namespace of the VirtualMachine")
	return cmd
}

// Errors of the lifecycle verbs, KubeVirt's words
// (pkg/virt-api/rest/lifecycle.go).
const (
	vmAlreadyRunning = "VM is already running"
	vmNotRunning     = "VM is not running"
)

// changeVM applies verb to the VirtualMachine ns/name with KubeVirt's
// rules (pkg/virt-api/rest/lifecycle.go: StartVMRequestHandler,
// StopVMRequestHandler, RestartVMRequestHandler), as JSON patches with a
// test of the fields they replace, so a concurrent change fails instead of
// being overwritten. Errors name the VirtualMachine.
func changeVM(ctx context.Context, c client.Client, verb, ns, name string) error {
	vm := &kubevirtv1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
		return vmError(ns, name, err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("VirtualMachineInstance %s/%s: %w", ns, name, err)
		}
		vmi = nil
	}
	spec, status, err := lifecyclePatch(verb, vm, vmi)
	if err != nil {
		return fmt.Errorf("VirtualMachine %s/%s: %w", ns, name, err)
	}
	switch {
	case spec != nil:
		err = c.Patch(ctx, vm, client.RawPatch(types.JSONPatchType, spec))
	case status != nil:
		err = c.Status().Patch(ctx, vm, client.RawPatch(types.JSONPatchType, status))
	}
	if err != nil {
		if strings.Contains(err.Error(), "test operation does not apply") {
			return fmt.Errorf("VirtualMachine %s/%s changed while converge %s read it: try again", ns, name, verb)
		}
		return vmError(ns, name, err)
	}
	return nil
}

// vmError words an API error about the VirtualMachine ns/name.
func vmError(ns, name string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("VirtualMachine %s/%s not found", ns, name)
	case meta.IsNoMatchError(err):
		return fmt.Errorf("the cluster does not serve the VirtualMachine API (CRD virtualmachines.kubevirt.io): install KubeVirt's CRDs (converge's virt component)")
	}
	return fmt.Errorf("VirtualMachine %s/%s: %w", ns, name, err)
}

// lifecyclePatch gives the JSON patch of vm's spec or of its status (one
// of them) that verb makes, given its VMI (nil: none), or the refusal.
func lifecyclePatch(verb string, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (spec, status []byte, err error) {
	rs := vmstate.RunStrategy(vm)
	final := vmi == nil || vmstate.Final(vmi.Status.Phase)
	switch verb {
	case "start":
		if vmi != nil && !vmstate.Final(vmi.Status.Phase) && vmi.Status.Phase != kubevirtv1.Unknown && vmi.Status.Phase != kubevirtv1.VmPhaseUnset {
			return nil, nil, fmt.Errorf(vmAlreadyRunning)
		}
		switch rs {
		case kubevirtv1.RunStrategyHalted:
			spec, err = runningPatch(vm, true)
			return spec, nil, err
		case kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyManual:
			if rs == kubevirtv1.RunStrategyRerunOnFailure && vmi != nil && vmi.Status.Phase == kubevirtv1.Failed {
				return nil, nil, fmt.Errorf("%s does not support starting VM from failed state", rs)
			}
			restart := vmi != nil && ((rs == kubevirtv1.RunStrategyRerunOnFailure && vmi.Status.Phase == kubevirtv1.Succeeded) ||
				(rs == kubevirtv1.RunStrategyManual && vmstate.Final(vmi.Status.Phase)))
			if restart {
				status, err = changeRequestPatch(vm, stopRequest(vmi), startRequest())
			} else {
				status, err = changeRequestPatch(vm, startRequest())
			}
			return nil, status, err
		}
		return nil, nil, fmt.Errorf("%s does not support manual start requests", rs)
	case "stop":
		switch rs {
		case kubevirtv1.RunStrategyHalted:
			if final {
				return nil, nil, fmt.Errorf(vmNotRunning)
			}
			// KubeVirt then needs a shorter grace period, which converge
			// does not offer yet
			return nil, nil, fmt.Errorf("%s only supports manual stop requests with a shorter graceperiod", rs)
		case kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyManual:
			if final {
				return nil, nil, fmt.Errorf(vmNotRunning)
			}
			status, err = changeRequestPatch(vm, stopRequest(vmi))
			return nil, status, err
		}
		spec, err = runningPatch(vm, false)
		return spec, nil, err
	case "restart":
		if rs == kubevirtv1.RunStrategyHalted || rs == kubevirtv1.RunStrategyOnce {
			// KubeVirt spells it "RunStategy"
			return nil, nil, fmt.Errorf("RunStrategy %s does not support manual restart requests", rs)
		}
		if vmi == nil {
			return nil, nil, fmt.Errorf("%s: %s", vmNotRunning, kubevirtv1.RunStrategyHalted)
		}
		status, err = changeRequestPatch(vm, stopRequest(vmi), startRequest())
		return nil, status, err
	}
	return nil, nil, fmt.Errorf("unknown verb %q", verb)
}

func startRequest() kubevirtv1.VirtualMachineStateChangeRequest {
	return kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest}
}

func stopRequest(vmi *kubevirtv1.VirtualMachineInstance) kubevirtv1.VirtualMachineStateChangeRequest {
	uid := vmi.UID
	return kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &uid}
}

// patchOp is one JSON patch (RFC 6902) operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// runningPatch sets spec.runStrategy to Always (running) or Halted, or
// the legacy spec.running when the VM uses it, testing the old value
// (KubeVirt lifecycle.go getRunningPatch).
func runningPatch(vm *kubevirtv1.VirtualMachine, running bool) ([]byte, error) {
	rs := kubevirtv1.RunStrategyHalted
	if running {
		rs = kubevirtv1.RunStrategyAlways
	}
	switch {
	case vm.Spec.RunStrategy != nil:
		return json.Marshal([]patchOp{{"test", "/spec/runStrategy", *vm.Spec.RunStrategy}, {"replace", "/spec/runStrategy", rs}})
	case vm.Spec.Running != nil: //nolint:staticcheck // the legacy field is still served
		return json.Marshal([]patchOp{{"test", "/spec/running", *vm.Spec.Running}, {"replace", "/spec/running", running}}) //nolint:staticcheck
	}
	return json.Marshal([]patchOp{{"add", "/spec/runStrategy", rs}})
}

// changeRequestPatch appends changes to status.stateChangeRequests, testing
// the current list (KubeVirt lifecycle.go getChangeRequestJson): an empty
// status gets one; a pending list takes only a lone Stop, which replaces it.
func changeRequestPatch(vm *kubevirtv1.VirtualMachine, changes ...kubevirtv1.VirtualMachineStateChangeRequest) ([]byte, error) {
	if equality.Semantic.DeepEqual(vm.Status, kubevirtv1.VirtualMachineStatus{}) {
		return json.Marshal([]patchOp{{"add", "/status", kubevirtv1.VirtualMachineStatus{StateChangeRequests: changes}}})
	}
	ops := []patchOp{{"test", "/status/stateChangeRequests", vm.Status.StateChangeRequests}}
	switch {
	case len(vm.Status.StateChangeRequests) == 0:
		ops = append(ops, patchOp{"add", "/status/stateChangeRequests", changes})
	case len(changes) == 1 && changes[0].Action == kubevirtv1.StopRequest:
		ops = append(ops, patchOp{"replace", "/status/stateChangeRequests", changes})
	default:
		return nil, fmt.Errorf("unable to complete request: stop/start already underway")
	}
	return json.Marshal(ops)
}
