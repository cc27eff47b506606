package vmadmission_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/virt/instancetype"
	"github.com/converge-dev/converge/operators/virt/vmadmission"
)

// itVMJSON is a VM in default with the matchers (JSON objects, "" for
// none) and a template of one pod interface, no CPU and no memory.
func itVMJSON(name, it, pref, tmplDomainExtra string) string {
	spec := `"runStrategy":"Halted","template":{"spec":{"domain":{` + tmplDomainExtra + `"devices":{"interfaces":[{"name":"default","bridge":{}}]}},"networks":[{"name":"default","pod":{}}]}}`
	if it != "" {
		spec += `,"instancetype":` + it
	}
	if pref != "" {
		spec += `,"preference":` + pref
	}
	return `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"namespace":"default","name":"` + name + `"},"spec":{` + spec + `}}`
}

// TestInstancetypesThroughAPIServer: the VM validation webhook, reading
// instancetypes through the API server (the pinned common bundle and two
// namespaced objects), refuses with the path and KubeVirt's message a VM
// whose template conflicts with its instancetype, an unknown kind,
// inferFromVolume, a spread its instancetype's vCPUs do not divide, an
// unmet preference requirement and fields converge does not run that
// the instancetype sets, naming it; it admits a VM naming an instancetype
// that does not exist yet, as KubeVirt does, and re-checks an update that
// changes only the matchers.
func TestInstancetypesThroughAPIServer(t *testing.T) {
	controlplane.RequireForTest(t)
	_, c, _ := controlplane.StartEnvForTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	crdtest.Install(t, c, "virtualmachines", "virtualmachineinstances", "virtualmachineinstancetypes",
		"virtualmachineclusterinstancetypes", "virtualmachinepreferences", "virtualmachineclusterpreferences")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "converge-system"}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{instancetype.ClusterInstancetypesBundle, instancetype.ClusterPreferencesBundle} {
		objs, err := instancetype.CommonBundle(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	spread := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachinePreference",
		"metadata": map[string]any{"namespace": "default", "name": "spread4"},
		"spec":     map[string]any{"cpu": map[string]any{"preferredCPUTopology": "spread", "spreadOptions": map[string]any{"across": "SocketsCoresThreads", "ratio": int64(4)}}}}}
	if err := c.Create(ctx, spread); err != nil {
		t.Fatal(err)
	}
	fast := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachinePreference",
		"metadata": map[string]any{"namespace": "default", "name": "fast"},
		"spec":     map[string]any{"volumes": map[string]any{"preferredStorageClassName": "ssd"}}}}
	if err := c.Create(ctx, fast); err != nil {
		t.Fatal(err)
	}

	w := vmadmission.Webhook(vmadmission.Options{Instancetypes: c})
	certs := webhooktest.Start(t, c, webhook.Options{
		Secret: types.NamespacedName{Namespace: "converge-system", Name: "converge-webhook-cert"}, Hosts: []string{"127.0.0.1"},
		Targets: w.Targets(), Resync: time.Second,
	})
	ep := webhooktest.Serve(t, ctx, certs, w)
	if err := w.Apply(ctx, c, ep, nil, "converge-test"); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		err := c.Create(ctx, object(t, itVMJSON("probe", `{"name":"a","kind":"Flavor"}`, "", "")), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "denied the request")
	})

	hook := fmt.Sprintf("admission webhook %q denied the request: ", vmadmission.VirtualMachineWebhookName)
	create := func(name, it, pref, extra string) func() error {
		return func() error { return c.Create(ctx, object(t, itVMJSON(name, it, pref, extra))) }
	}
	u1large := `{"name":"u1.large"}`
	for _, tc := range []struct {
		name string
		do   func() error
		want []string // substrings of the error; nil: admitted
	}{
		{"u1.large admitted", create("web", u1large, "", ""), nil},
		{"u1.large with ubuntu admitted", create("ubuntu", u1large, `{"name":"ubuntu","kind":"VirtualMachineClusterPreference"}`, ""), nil},
		{"conflicting template refused", create("clash", u1large, "", `"cpu":{"sockets":2},"memory":{"guest":"1Gi"},`), []string{
			hook + "VirtualMachine default/clash: spec.template.spec.domain.cpu.sockets: VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type",
			"VirtualMachine default/clash: spec.template.spec.domain.memory.guest: VM field(s) spec.template.spec.domain.memory.guest conflicts with selected instance type"}},
		{"unknown kind refused", create("flavor", `{"name":"u1.large","kind":"Flavor"}`, "", ""), []string{
			hook + "VirtualMachine default/flavor: spec.instancetype.kind: got unexpected kind in InstancetypeMatcher: Flavor"}},
		{"inferFromVolume refused", create("infer", "", `{"inferFromVolume":"root"}`, ""), []string{
			"VirtualMachine default/infer: spec.preference.inferFromVolume: " + instancetype.InferFromVolumeReason}},
		{"missing instancetype admitted", create("later", `{"name":"x1.later"}`, "", `"cpu":{"sockets":2},`), nil},
		{"spread not dividing the vCPUs refused", create("spread", `{"name":"u1.xlarge"}`, `{"name":"spread4","kind":"VirtualMachinePreference"}`, ""), []string{
			"VirtualMachine default/spread: instancetype.spec.cpu.guest: 4 vCPUs provided by the instance type are not divisible by the number of threads per core 2 and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of 4"}},
		{"requirements not met refused", create("nano", `{"name":"u1.nano"}`, `{"name":"fedora"}`, ""), []string{
			"VirtualMachine default/nano: spec.instancetype: failure checking preference requirements: insufficient Memory resources of 512Mi provided by instance type, preference requires 2Gi"}},
		{"fields converge does not run refused, naming the instancetype", create("cx", `{"name":"cx1.medium"}`, "", ""), []string{
			"VirtualMachine default/cx: spec.template.spec.domain.memory.hugepages: ",
			"(set by VirtualMachineClusterInstancetype cx1.medium)"}},
		{"a preferred storage class converge does not apply refused", func() error {
			vm := object(t, itVMJSON("dvt", "", `{"name":"fast","kind":"VirtualMachinePreference"}`, ""))
			if err := unstructured.SetNestedSlice(vm.Object, []any{map[string]any{"metadata": map[string]any{"name": "root"},
				"spec": map[string]any{"source": map[string]any{"blank": map[string]any{}},
					"storage": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}}},
				"spec", "dataVolumeTemplates"); err != nil {
				t.Fatal(err)
			}
			return c.Create(ctx, vm)
		}, []string{`VirtualMachine default/dvt: spec.dataVolumeTemplates[0].spec.storage.storageClassName: unset, and the preference's volumes.preferredStorageClassName "ssd" is not applied by converge`}},
		{"a matcher-only update is re-checked", func() error {
			return c.Patch(ctx, object(t, itVMJSON("later", `{"name":"x1.later"}`, "", "")),
				client.RawPatch(types.MergePatchType, []byte(`{"spec":{"instancetype":{"name":"u1.large"}}}`)))
		}, []string{"VirtualMachine default/later: spec.template.spec.domain.cpu.sockets: VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type"}},
		{"a metadata update is not", func() error {
			return c.Patch(ctx, object(t, itVMJSON("later", `{"name":"x1.later"}`, "", "")),
				client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`)))
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("admitted, want it refused")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}
