package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

// installNADCRD installs Multus' NetworkAttachmentDefinition CRD (its
// upstream schema: spec.config, a string).
func (e *env) installNADCRD(t *testing.T) {
	t.Helper()
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "network-attachment-definitions.k8s.cni.cncf.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "k8s.cni.cncf.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "network-attachment-definitions",
				Singular: "network-attachment-definition", Kind: "NetworkAttachmentDefinition", ListKind: "NetworkAttachmentDefinitionList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
	if err := e.C.Create(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
}

func multusVMI(name, network string) *kubevirtv1.VirtualMachineInstance {
	v := virttest.VMISpec("1Gi", nil)
	v.Name = name
	v.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "br", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}}
	v.Spec.Networks = []kubevirtv1.Network{{Name: "br", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: network}}}}
	return v
}

// TestBridgeResources: a VMI on a NetworkAttachmentDefinition with
// resourceName bridge.network.kubevirt.io/br0 goes to the node that has
// the bridge; once its one unit is taken the next waits; a VMI on a
// missing definition waits with a message naming it.
func TestBridgeResources(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.installNADCRD(t)
	nad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"namespace": e.NS, "name": "br0",
			"annotations": map[string]any{scheduler.NADResourceAnnotation: "bridge.network.kubevirt.io/br0"}},
		"spec": map[string]any{"config": `{"cniVersion":"0.3.1","type":"bridge","bridge":"br0"}`},
	}}
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.C.Create(ctx, nad) == nil })
	withBridge := virttest.Node("bridged", "2", "4Gi", nil)
	withBridge.Status.Allocatable["bridge.network.kubevirt.io/br0"] = resource.MustParse("1")
	e.AddNode(t, withBridge)
	e.AddNode(t, virttest.Node("plain", "8", "32Gi", nil))

	for _, v := range []*kubevirtv1.VirtualMachineInstance{multusVMI("first", "br0"), multusVMI("second", e.NS+"/br0"), multusVMI("lost", "nope")} {
		if err := e.C.Create(ctx, v); err != nil {
			t.Fatal(err)
		}
		if v.Name == "first" { // the order the test expects: first gets the unit
			controlplane.Eventually(t, 30*time.Second, func() bool { return e.VMI(t, "first").Status.NodeName != "" })
		}
	}
	message := func(name string) string {
		for _, c := range e.VMI(t, name).Status.Conditions {
			if c.Type == "PodScheduled" && c.Status == corev1.ConditionFalse {
				return c.Message
			}
		}
		return ""
	}
	if n := e.VMI(t, "first").Status.NodeName; n != "bridged" {
		t.Errorf("first went to %q, want bridged", n)
	}
	// Wait for the final messages (until the scheduler's cache shows the
	// nodes Ready, they may name the not-ready taint).
	want := "0/2 nodes are available: 2 Insufficient bridge.network.kubevirt.io/br0."
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last messages: %s", last)
		}
	})
	controlplane.Eventually(t, 30*time.Second, func() bool {
		second, lost := message("second"), message("lost")
		last = fmt.Sprintf("second %q, lost %q", second, lost)
		return second == want && strings.Contains(lost, "network br: NetworkAttachmentDefinition vms/nope")
	})
}

// TestInferredBridgeAndDeletedNAD: a NetworkAttachmentDefinition without
// resourceName whose plugin is a bridge requires that bridge; a placed
// VMI keeps holding its bridge after its definition is deleted, so the
// next VMI on the same bridge waits.
func TestInferredBridgeAndDeletedNAD(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.installNADCRD(t)
	nad := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
			"metadata": map[string]any{"namespace": e.NS, "name": name},
			"spec":     map[string]any{"config": `{"cniVersion":"0.3.1","type":"bridge","bridge":"br1"}`},
		}}
	}
	first, second := nad("first-net"), nad("second-net")
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.C.Create(ctx, first) == nil })
	if err := e.C.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	withBridge := virttest.Node("bridged", "2", "4Gi", nil)
	withBridge.Status.Allocatable["bridge.network.kubevirt.io/br1"] = resource.MustParse("1")
	e.AddNode(t, withBridge)
	e.AddNode(t, virttest.Node("plain", "8", "32Gi", nil))

	if err := e.C.Create(ctx, multusVMI("first", "first-net")); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool { return e.VMI(t, "first").Status.NodeName != "" })
	if n := e.VMI(t, "first").Status.NodeName; n != "bridged" {
		t.Fatalf("first went to %q, want bridged (the only node with bridge.network.kubevirt.io/br1)", n)
	}
	if err := e.C.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := e.C.Create(ctx, multusVMI("second", "second-net")); err != nil {
		t.Fatal(err)
	}
	want := "0/2 nodes are available: 2 Insufficient bridge.network.kubevirt.io/br1."
	var last string
	controlplane.Eventually(t, 30*time.Second, func() bool {
		last = ""
		for _, c := range e.VMI(t, "second").Status.Conditions {
			if c.Type == "PodScheduled" && c.Status == corev1.ConditionFalse {
				last = c.Message
			}
		}
		return last == want
	})
	if n := e.VMI(t, "second").Status.NodeName; n != "" {
		t.Errorf("second went to %q, want it pending: first still holds br1 (last message %q)", n, last)
	}
}
