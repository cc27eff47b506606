package vmstate_test

import (
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

func TestRunStrategyLegacy(t *testing.T) {
	yes, no := true, false
	for _, tt := range []struct {
		running *bool
		want    kubevirtv1.VirtualMachineRunStrategy
	}{{&yes, kubevirtv1.RunStrategyAlways}, {&no, kubevirtv1.RunStrategyHalted}, {nil, kubevirtv1.RunStrategyHalted}} {
		vm := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Running: tt.running}}
		if got := vmstate.RunStrategy(vm); got != tt.want {
			t.Errorf("RunStrategy(running %v) = %s, want %s", tt.running, got, tt.want)
		}
	}
}
