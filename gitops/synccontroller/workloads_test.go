package synccontroller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// The workloads testWorkloads commits: a Namespace, a cloud-init Secret,
// a bridge network, a DataVolume and a VM.
const (
	workloadsBase = `apiVersion: v1
kind: Namespace
metadata: {name: vms}
---
apiVersion: v1
kind: Secret
metadata: {name: userdata, namespace: vms}
stringData: {userdata: "#cloud-config"}
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: br1, namespace: vms}
spec:
  config: '{"cniVersion": "0.3.1", "name": "br1", "type": "bridge", "bridge": "br1"}'
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata: {name: disk, namespace: vms}
spec:
  source: {http: {url: "http://127.0.0.1:1/disk.img"}}
  storage: {resources: {requests: {storage: 1Gi}}}
`
	workloadsVM = `---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: web, namespace: vms}
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        devices:
          interfaces: [{name: default, bridge: {}}]
        resources: {requests: {memory: 64Mi}}
      networks: [{name: default, pod: {}}]
`
)

// testWorkloads is TestSync's "workloads" subtest.
func testWorkloads(t *testing.T, e *testEnv, local types.NamespacedName) {
	ctx := context.Background()
	e.wait(t, local, time.Minute, "Ready", ready)
	rev := "main@sha1:" + e.repo.Commit(t, "VMs", map[string]string{"workloads.yaml": workloadsBase + workloadsVM})
	e.request(t, local)
	s, _ := e.wait(t, local, time.Minute, "workloads applied", readyAt(rev))
	for _, id := range []string{"_vms__Namespace", "vms_userdata__Secret", "vms_br1_k8s.cni.cncf.io_NetworkAttachmentDefinition",
		"vms_disk_cdi.kubevirt.io_DataVolume", "vms_web_kubevirt.io_VirtualMachine"} {
		en := inventoryEntry(s, id)
		if en == nil || en.Component != "workloads" {
			t.Errorf("inventory entry %s = %+v, want one of component workloads", id, en)
		}
	}
	if _, err := get(e.c1, "kubevirt.io/v1", "VirtualMachine", types.NamespacedName{Namespace: "vms", Name: "web"}); err != nil {
		t.Fatalf("VM: %v", err)
	}

	// KubeVirt's and CDI's controllers write their fields: the VM's
	// status, the spec fields virt-api and the VM controller fill in, the
	// DataVolume's import progress.
	vm := types.NamespacedName{Namespace: "vms", Name: "web"}
	patch := func(apiVersion, kind string, status bool, p string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace("vms")
		u.SetName(map[string]string{"VirtualMachine": "web", "DataVolume": "disk"}[kind])
		var err error
		if status {
			err = e.c1.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(p)), client.FieldOwner("virt-controller"))
		} else {
			err = e.c1.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(p)), client.FieldOwner("virt-controller"))
		}
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
	}
	patch("kubevirt.io/v1", "VirtualMachine", false, `{"metadata": {"annotations": {"kubevirt.io/latest-observed-api-version": "v1"}},
 "spec": {"template": {"metadata": {"annotations": {"kubevirt.io/pci-topology-version": "v3"}},
  "spec": {"architecture": "amd64", "domain": {"firmware": {"serial": "s-1", "uuid": "5d307ca9-b3ef-428c-8861-06e72d69f223"}}}}}}`)
	u, _ := get(e.c1, "kubevirt.io/v1", "VirtualMachine", vm)
	patch("kubevirt.io/v1", "VirtualMachine", true, fmt.Sprintf(`{"status": {"created": true, "ready": true, "printableStatus": "Running",
 "observedGeneration": %d, "conditions": [{"type": "Ready", "status": "True"}]}}`, u.GetGeneration()))
	patch("cdi.kubevirt.io/v1beta1", "DataVolume", true, `{"status": {"phase": "ImportInProgress", "progress": "45.50%"}}`)
	req := e.request(t, local)
	s, _ = e.wait(t, local, time.Minute, "the reconcile after the controllers' writes", func(s *v1alpha1.Sync) bool {
		return ready(s) && s.Status.LastHandledReconcileAt == req
	})
	for _, kind := range []string{"VirtualMachine", "DataVolume"} {
		if n := e.metric(t, "converge_drift_corrected_total", map[string]string{"name": local.Name, "kind": kind}); n != 0 {
			t.Errorf("converge_drift_corrected_total{kind=%s} = %v after the controllers' writes, want 0", kind, n)
		}
	}
	u, _ = get(e.c1, "kubevirt.io/v1", "VirtualMachine", vm)
	if v, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "domain", "firmware", "uuid"); v != "5d307ca9-b3ef-428c-8861-06e72d69f223" {
		t.Errorf("VM firmware.uuid = %q, want the VM controller's kept", v)
	}
	if v, _, _ := unstructured.NestedString(u.Object, "status", "printableStatus"); v != "Running" {
		t.Errorf("VM printableStatus = %q, want the VM controller's kept", v)
	}
	var workloads *v1alpha1.ComponentStatus
	for i := range s.Status.Components {
		if s.Status.Components[i].Name == "workloads" {
			workloads = &s.Status.Components[i]
		}
	}
	if workloads == nil || workloads.Health != "Progressing" || workloads.Message != "DataVolume/vms/disk Progressing: ImportInProgress 45.50%" {
		t.Errorf("workloads component %+v, want Progressing with the DataVolume's progress", workloads)
	}

	// A commit removing the VM prunes it.
	rev = "main@sha1:" + e.repo.Commit(t, "no VM", map[string]string{"workloads.yaml": workloadsBase})
	e.request(t, local)
	s, _ = e.wait(t, local, time.Minute, "VM removed", readyAt(rev))
	if _, err := get(e.c1, "kubevirt.io/v1", "VirtualMachine", vm); !absent(err) {
		t.Errorf("VM still there after the commit removing it: %v", err)
	}
	if inventoryEntry(s, "vms_web_kubevirt.io_VirtualMachine") != nil {
		t.Error("VM still in the inventory")
	}
	if _, err := get(e.c1, "cdi.kubevirt.io/v1beta1", "DataVolume", types.NamespacedName{Namespace: "vms", Name: "disk"}); err != nil {
		t.Errorf("DataVolume: %v, want it kept", err)
	}
	msgs := strings.Join(e.events(t, local.Name)[v1alpha1.SucceededReason], "\n")
	if !strings.Contains(msgs, "VirtualMachine/vms/web deleted") {
		t.Errorf("no event lists the VM deleted:\n%s", msgs)
	}

	// Back to no workloads.
	rev = "main@sha1:" + e.repo.Commit(t, "no workloads", map[string]string{"workloads.yaml": ""})
	e.request(t, local)
	e.wait(t, local, time.Minute, "workloads removed", readyAt(rev))
}

// inventoryEntry gives the inventory entry id of s; nil when none.
func inventoryEntry(s *v1alpha1.Sync, id string) *v1alpha1.InventoryEntry {
	if s.Status.Inventory == nil {
		return nil
	}
	for i := range s.Status.Inventory.Entries {
		if s.Status.Inventory.Entries[i].ID == id {
			return &s.Status.Inventory.Entries[i]
		}
	}
	return nil
}
