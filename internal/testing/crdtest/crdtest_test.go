package crdtest_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
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

// TestInstallPermissive: a VirtualMachine with a field the real schema
// does not know is stored with that field kept.
func TestInstallPermissive(t *testing.T) {
	_, c, _ := controlplane.StartEnvForTest(t)
	crdtest.InstallPermissive(t, c, "virtualmachines", "VirtualMachine")
	ctx := context.Background()
	vm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "vm", "namespace": "default"},
		"spec":     map[string]any{"notInTheSchema": "kept"},
	}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatalf("creating a VirtualMachine after InstallPermissive: %v", err)
	}
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("kubevirt.io/v1")
	got.SetKind("VirtualMachine")
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "vm"}, got); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(got.Object, "spec", "notInTheSchema"); v != "kept" {
		t.Errorf("spec.notInTheSchema %q after a round trip, want kept", v)
	}
}
