package crdtest_test

import (
	"context"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/internal/controlplane"
	"github.com/converge-dev/converge/internal/crdtest"
)

// TestInstall: the graph's VirtualMachine CRD installed through Install
// serves VirtualMachines at once.
func TestInstall(t *testing.T) {
	_, c, _ := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme)
	crdtest.Install(t, c, "virtualmachines")
	if err := c.List(context.Background(), &kubevirtv1.VirtualMachineList{}); err != nil {
		t.Fatalf("listing VirtualMachines after Install: %v", err)
	}
	if err := c.List(context.Background(), &kubevirtv1.VirtualMachineInstanceList{}); err == nil {
		t.Fatal("VirtualMachineInstances are served though their CRD was not installed")
	}
}
