package virtcontroller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// upstreamVM is a VirtualMachine as KubeVirt's docs write it, with fields
// converge's agent does not use: the schema generated from kubevirt.io/api
// must keep them unchanged.
const upstreamVM = `
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: testvm
  namespace: vms
spec:
  runStrategy: Halted
  template:
    metadata:
      labels:
        kubevirt.io/size: small
    spec:
      domain:
        cpu: {cores: 1}
        devices:
          disks:
          - name: containerdisk
            disk: {bus: virtio}
          interfaces:
          - name: default
            masquerade: {}
        resources:
          requests: {memory: 64M}
      networks:
      - name: default
        pod: {}
      volumes:
      - name: containerdisk
        containerDisk: {image: quay.io/kubevirt/cirros-container-disk-demo}
`

// TestCRDs checks the engine's VM CRDs on the API server: KubeVirt's
// printer columns and short names, an upstream manifest kept whole, and a
// runStrategy outside the enum refused.
func TestCRDs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cols := map[string][]string{
		"virtualmachines.kubevirt.io":         {"Age", "Status", "Ready"},
		"virtualmachineinstances.kubevirt.io": {"Age", "Phase", "IP", "NodeName", "Ready", "Live-Migratable", "Paused"},
	}
	for name, want := range cols {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := e.C.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
			got = append(got, c.Name)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("CRD %s printer columns = %v, want %v", name, got, want)
		}
		if len(crd.Spec.Names.ShortNames) == 0 {
			t.Errorf("CRD %s has no short names", name)
		}
	}

	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(upstreamVM), &u.Object); err != nil {
		t.Fatal(err)
	}
	want, _, _ := unstructured.NestedMap(u.Object, "spec", "template")
	if err := e.C.Create(ctx, u); err != nil {
		t.Fatalf("creating the upstream VirtualMachine: %v", err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(kubevirtv1.VirtualMachineGroupVersionKind)
	if err := e.C.Get(ctx, types.NamespacedName{Namespace: e.NS, Name: "testvm"}, got); err != nil {
		t.Fatal(err)
	}
	gotT, _, _ := unstructured.NestedMap(got.Object, "spec", "template")
	wb, _ := yaml.Marshal(want)
	gb, _ := yaml.Marshal(gotT)
	if string(wb) != string(gb) {
		t.Errorf("spec.template changed on the server:\n got %s\nwant %s", gb, wb)
	}
	// The controller writes the status of a VM created from YAML too.
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vm := e.VM(t, "testvm")
		return vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStopped
	})

	bad := u.DeepCopy()
	bad.SetName("bad")
	bad.SetResourceVersion("")
	_ = unstructured.SetNestedField(bad.Object, "Sometimes", "spec", "runStrategy")
	err := e.C.Create(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "spec.runStrategy") {
		t.Errorf("creating a VirtualMachine with runStrategy Sometimes: err = %v, want a spec.runStrategy error", err)
	}
}
