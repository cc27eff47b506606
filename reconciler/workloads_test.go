package reconciler_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/reconciler"
)

// Workloads of the tests: a namespace holding a VM, the DataVolume it
// boots from, a bridge network and a cloud-init Secret.
const (
	wlNamespace = "apiVersion: v1\nkind: Namespace\nmetadata: {name: vms}\n"
	wlSecret    = "apiVersion: v1\nkind: Secret\nmetadata: {name: userdata, namespace: vms}\nstringData: {userdata: '#cloud-config'}\n"
	wlNAD       = "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: br1, namespace: vms}\n" +
		"spec: {config: '{\"cniVersion\": \"0.3.1\", \"name\": \"br1\", \"type\": \"bridge\", \"bridge\": \"br1\"}'}\n"
	wlDV = "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata: {name: disk, namespace: vms}\n" +
		"spec: {source: {http: {url: 'http://127.0.0.1:1/disk.img'}}, storage: {resources: {requests: {storage: 1Gi}}}}\n"
	wlVM = `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: web, namespace: vms, labels: {app: web}}
spec:
  runStrategy: Always
  template:
    metadata: {labels: {app: web}}
    spec:
      domain:
        devices:
          interfaces: [{name: default, bridge: {}}]
        resources: {requests: {memory: 64Mi}}
      networks: [{name: default, pod: {}}]
`
)

const (
	vmAPI = "kubevirt.io/v1"
	dvAPI = "cdi.kubevirt.io/v1beta1"
)

// renderWorkloads renders testdata/example plus files (name → YAML).
func renderWorkloads(t *testing.T, files map[string]string) *graph.Rendered {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"hyperconverged.yaml", "hostpathprovisioner.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "example", f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = string(b)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := engine(t)
	cfg, err := e.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.Render(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// syncUntilApplied plays the operators: it writes Available=True on every
// operand CR of r applied so far and syncs, until the health gates let
// the workloads through (hpp waits for cdi, the workloads for both).
func syncUntilApplied(t *testing.T, c client.Client, p *reconciler.Pipeline, r *graph.Rendered) *reconciler.Result {
	t.Helper()
	for range 4 {
		for _, o := range r.Objects() {
			if r.HealthRule(o.GetKind()) == graph.HealthConditions && obj(t, c, o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName()) != nil {
				setConditions(t, c, o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName(), metav1.ConditionTrue, metav1.ConditionFalse, "ready")
			}
		}
		res := doSync(t, p, r)
		if health(res)[graph.WorkloadsComponent].Health != reconciler.Waiting {
			return res
		}
	}
	t.Fatal("the workloads are still waiting after every operand turned Available")
	return nil
}

// writeAs patches obj (merge patch, the status subresource when status)
// with field manager manager, as a controller would.
func writeAs(t *testing.T, c client.Client, manager, apiVersion, kind, ns, name string, status bool, patch string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	p := client.RawPatch(types.MergePatchType, []byte(patch))
	var err error
	if status {
		err = c.Status().Patch(context.Background(), u, p, client.FieldOwner(manager))
	} else {
		err = c.Patch(context.Background(), u, p, client.FieldOwner(manager))
	}
	if err != nil {
		t.Fatalf("%s %s/%s: writing as %s: %v", kind, ns, name, manager, err)
	}
}

// The fields KubeVirt's controllers and webhooks write into a VM that Git
// never sets, which Argo CD users see as permanent OutOfSync: virt-api's
// mutator (spec.template.spec.architecture, machine type), the VM
// controller (the firmware serial and UUID it persists, the API version
// annotations, the pci-topology annotation of the template, its
// finalizer) and, through the status subresource, the VM's status.
const (
	vmControllerSpec = `{"metadata": {"annotations": {"kubevirt.io/latest-observed-api-version": "v1", "kubevirt.io/storage-observed-api-version": "v1"},
  "finalizers": ["kubevirt.io/virtualMachineControllerFinalize"]},
 "spec": {"template": {"metadata": {"annotations": {"kubevirt.io/pci-topology-version": "v3"}},
  "spec": {"architecture": "amd64", "domain": {"machine": {"type": "q35"},
   "firmware": {"serial": "6e3b1f7c-2d4a-4b8e-9f10-1a2b3c4d5e6f", "uuid": "5d307ca9-b3ef-428c-8861-06e72d69f223"}}}}}}`
	// vmControllerStatus takes the generation the controller observed.
	vmControllerStatus = `{"status": {"created": true, "ready": true, "printableStatus": "Running", "observedGeneration": %d, "desiredGeneration": %[1]d,
  "conditions": [{"type": "Ready", "status": "True"}],
  "volumeSnapshotStatuses": [{"name": "default", "enabled": false, "reason": "no volumes"}]}}`
)

// TestWorkloads applies a config holding, beside the example's stack, a
// Namespace, a Secret, a NetworkAttachmentDefinition, a DataVolume and a
// VirtualMachine, with health gates, against a real API server, the test
// playing the operators and KubeVirt's and CDI's controllers:
//
//  1. the workloads wait until every other component is healthy;
//  2. then they are applied, Namespace first, and are Progressing until
//     the VM is Ready and the DataVolume Succeeded, the DataVolume's
//     progress in the message;
//  3. the fields KubeVirt's controllers write (spec and status) are not
//     drift: nothing is reported, re-sent or reverted; a field Git sets,
//     changed by someone else, is;
//  4. a commit removing the VM prunes it (VM before Namespace), and a
//     Namespace holding a VM converge did not apply is not pruned.
func TestWorkloads(t *testing.T) {
	c, p, _ := newClient(t)
	ctx := context.Background()
	files := func(docs ...string) map[string]string {
		return map[string]string{"workloads.yaml": strings.Join(docs, "---\n")}
	}
	r := renderWorkloads(t, files(wlVM, wlNamespace, wlSecret, wlNAD, wlDV))

	// 1. Health gates hold the workloads back.
	res := doSync(t, p, r)
	if h := health(res)[graph.WorkloadsComponent]; h.Health != reconciler.Waiting || !strings.Contains(h.Message, "waiting for") {
		t.Errorf("workloads = %s %q, want Waiting for the stack", h.Health, h.Message)
	}
	if obj(t, c, "v1", "Namespace", "", "vms") != nil || obj(t, c, vmAPI, "VirtualMachine", "vms", "web") != nil {
		t.Fatal("workloads applied before the stack is healthy")
	}

	// 2. Once the operands are Available the workloads are applied.
	res = syncUntilApplied(t, c, p, r)
	h := health(res)[graph.WorkloadsComponent]
	if h.Health != reconciler.Progressing || !strings.Contains(h.Message, "VirtualMachine/vms/web Progressing: no status yet") ||
		!strings.Contains(h.Message, "DataVolume/vms/disk Progressing: no status yet") {
		t.Errorf("workloads = %s %q, want Progressing naming the VM and the DataVolume", h.Health, h.Message)
	}
	for _, o := range []struct{ api, kind, ns, name string }{
		{"v1", "Namespace", "", "vms"}, {"v1", "Secret", "vms", "userdata"},
		{"k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", "vms", "br1"},
		{dvAPI, "DataVolume", "vms", "disk"}, {vmAPI, "VirtualMachine", "vms", "web"},
	} {
		if obj(t, c, o.api, o.kind, o.ns, o.name) == nil {
			t.Errorf("%s %s/%s not applied", o.kind, o.ns, o.name)
		}
	}

	// 3. KubeVirt's and CDI's controllers write their fields.
	writeAs(t, c, "virt-controller", vmAPI, "VirtualMachine", "vms", "web", false, vmControllerSpec)
	gen := obj(t, c, vmAPI, "VirtualMachine", "vms", "web").GetGeneration()
	writeAs(t, c, "virt-controller", vmAPI, "VirtualMachine", "vms", "web", true, fmt.Sprintf(vmControllerStatus, gen))
	writeAs(t, c, "cdi-controller", dvAPI, "DataVolume", "vms", "disk", true,
		`{"status": {"phase": "ImportInProgress", "progress": "45.50%", "claimName": "disk"}}`)
	res = doSync(t, p, r)
	if len(res.Drifted) != 0 {
		t.Errorf("Drifted = %v after KubeVirt's and CDI's controllers wrote their fields; want none", res.Drifted)
	}
	a := actions(res.ChangeSet)
	if a["VirtualMachine/vms/web"] != ssa.UnchangedAction || a["DataVolume/vms/disk"] != ssa.UnchangedAction {
		t.Errorf("VM %s, DataVolume %s; want both unchanged", a["VirtualMachine/vms/web"], a["DataVolume/vms/disk"])
	}
	vm := obj(t, c, vmAPI, "VirtualMachine", "vms", "web")
	for path, want := range map[string]string{
		"spec.template.spec.architecture":                                     "amd64",
		"spec.template.spec.domain.firmware.serial":                           "6e3b1f7c-2d4a-4b8e-9f10-1a2b3c4d5e6f",
		"spec.template.spec.domain.firmware.uuid":                             "5d307ca9-b3ef-428c-8861-06e72d69f223",
		"spec.template.spec.domain.machine.type":                              "q35",
		"spec.template.metadata.annotations.kubevirt.io/pci-topology-version": "v3",
		"metadata.annotations.kubevirt.io/latest-observed-api-version":        "v1",
		"status.printableStatus":                                              "Running",
	} {
		if got := nested(vm.Object, path); got != want {
			t.Errorf("VM %s = %q, want %q kept", path, got, want)
		}
	}
	if h := health(res)[graph.WorkloadsComponent]; h.Health != reconciler.Progressing || h.Message != "DataVolume/vms/disk Progressing: ImportInProgress 45.50%" {
		t.Errorf("workloads = %s %q, want Progressing with the DataVolume's progress only", h.Health, h.Message)
	}
	writeAs(t, c, "cdi-controller", dvAPI, "DataVolume", "vms", "disk", true, `{"status": {"phase": "Succeeded", "progress": "100.0%"}}`)
	res = doSync(t, p, r)
	if h := health(res)[graph.WorkloadsComponent]; h.Health != reconciler.Healthy || len(res.Drifted) != 0 {
		t.Errorf("workloads = %s %q, drifted %v; want Healthy, no drift", h.Health, h.Message, res.Drifted)
	}
	// A field Git sets is converge's: someone else's change is drift,
	// reverted.
	writeAs(t, c, "someone", vmAPI, "VirtualMachine", "vms", "web", false, `{"spec": {"runStrategy": "Halted"}}`)
	res = doSync(t, p, r)
	if len(res.Drifted) != 1 || !strings.Contains(res.Drifted[0], "_web_kubevirt.io_VirtualMachine") {
		t.Errorf("Drifted = %v, want the VM", res.Drifted)
	}
	if got := nested(obj(t, c, vmAPI, "VirtualMachine", "vms", "web").Object, "spec.runStrategy"); got != "Always" {
		t.Errorf("runStrategy = %q, want Git's Always back", got)
	}

	// 4. A commit removing the VM prunes it; the VM controller's finalizer
	// holds it until the controller (the test) lets go.
	res = doSync(t, p, renderWorkloads(t, files(wlNamespace, wlSecret, wlNAD, wlDV)))
	if a := actions(res.ChangeSet); a["VirtualMachine/vms/web"] != ssa.DeletedAction {
		t.Fatalf("VM %q, want deleted", a["VirtualMachine/vms/web"])
	}
	if vm := obj(t, c, vmAPI, "VirtualMachine", "vms", "web"); vm == nil || vm.GetDeletionTimestamp() == nil {
		t.Fatalf("VM %v, want it being deleted (finalizer)", vm)
	}
	writeAs(t, c, "virt-controller", vmAPI, "VirtualMachine", "vms", "web", false, `{"metadata": {"finalizers": null}}`)
	if obj(t, c, vmAPI, "VirtualMachine", "vms", "web") != nil {
		t.Error("VM still there without its finalizer")
	}

	// A VM someone created by hand in the namespace keeps the namespace
	// when the config drops it; the rest is pruned, namespaced objects
	// before their Namespace.
	manual := &unstructured.Unstructured{}
	manual.SetAPIVersion(vmAPI)
	manual.SetKind("VirtualMachine")
	manual.SetNamespace("vms")
	manual.SetName("manual")
	_ = unstructured.SetNestedField(manual.Object, "Halted", "spec", "runStrategy")
	_ = unstructured.SetNestedMap(manual.Object, map[string]any{"spec": map[string]any{"domain": map[string]any{"devices": map[string]any{}}}}, "spec", "template")
	if err := c.Create(ctx, manual); err != nil {
		t.Fatal(err)
	}
	empty := renderWorkloads(t, map[string]string{})
	_, err := trySync(t, p, empty)
	if err == nil || !strings.Contains(err.Error(), "Namespace vms: not deleted: it still holds VirtualMachine/vms/manual") {
		t.Fatalf("sync err = %v, want the Namespace held by the hand-made VM", err)
	}
	if obj(t, c, "v1", "Namespace", "", "vms") == nil || obj(t, c, dvAPI, "DataVolume", "vms", "disk") != nil {
		t.Error("want the Namespace kept and the DataVolume pruned")
	}
	if err := c.Delete(ctx, manual); err != nil {
		t.Fatal(err)
	}
	res = doSync(t, p, empty)
	var order []string
	for _, e := range res.ChangeSet.Entries {
		if e.Action == ssa.DeletedAction {
			order = append(order, e.Subject)
		}
	}
	if strings.Join(order, ",") != "Namespace/vms" {
		t.Errorf("deleted %v, want the Namespace now", order)
	}
	if ns := obj(t, c, "v1", "Namespace", "", "vms"); ns != nil && ns.GetDeletionTimestamp() == nil {
		t.Error("Namespace not deleted")
	}
	if _, ok := health(res)[graph.WorkloadsComponent]; ok {
		t.Error("a config without workloads has a workloads component")
	}
}

// TestPruneOrder: a commit removing a Namespace and everything in it
// deletes the namespaced objects first (the VM, then what it refers to),
// the Namespace last.
func TestPruneOrder(t *testing.T) {
	c, _, mk := newClient(t)
	p := mk(testOptions(false))
	doSync(t, p, renderWorkloads(t, map[string]string{"w.yaml": strings.Join([]string{wlNamespace, wlSecret, wlNAD, wlDV, wlVM}, "---\n")}))
	if obj(t, c, vmAPI, "VirtualMachine", "vms", "web") == nil {
		t.Fatal("VM not applied")
	}
	res := doSync(t, p, renderWorkloads(t, map[string]string{}))
	var order []string
	for _, e := range res.ChangeSet.Entries {
		if e.Action == ssa.DeletedAction {
			order = append(order, e.Subject)
		}
	}
	index := map[string]int{}
	for i, s := range order {
		index[s] = i + 1
	}
	vm, dv, sec, ns := index["VirtualMachine/vms/web"], index["DataVolume/vms/disk"], index["Secret/vms/userdata"], index["Namespace/vms"]
	if vm == 0 || dv == 0 || sec == 0 || ns == 0 || !(vm < sec && dv < sec && sec < ns) || ns != len(order) {
		t.Errorf("prune order %v, want the VM and DataVolume, then the Secret, the Namespace last", order)
	}
}

// nested reads a dotted path whose last element may contain dots (an
// annotation key) from m, as a string.
func nested(m map[string]any, path string) string {
	parts := strings.Split(path, ".")
	for i := len(parts); i > 0; i-- {
		head := parts[:i-1]
		key := strings.Join(parts[i-1:], ".")
		sub, ok, _ := unstructured.NestedMap(m, head...)
		if !ok && len(head) > 0 {
			continue
		}
		if len(head) == 0 {
			sub = m
		}
		if v, ok := sub[key].(string); ok {
			return v
		}
	}
	return ""
}

// laggingReader is the API server seen through a cache that lags: while
// replaying, List gives what it gave when recording (the live state a
// watch-driven sync reads can be older than the object by the time the
// apply reaches the API server); Get always reads the API server.
type laggingReader struct {
	client.Reader
	replay bool
	lists  map[string]runtime.Object
}

func (r *laggingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	key := list.GetObjectKind().GroupVersionKind().String()
	if r.replay {
		if l, ok := r.lists[key]; ok {
			reflect.ValueOf(list).Elem().Set(reflect.ValueOf(l.DeepCopyObject()).Elem())
			return nil
		}
	}
	if err := r.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	r.lists[key] = list.DeepCopyObject()
	return nil
}

// TestNoDriftFromALaggingCache: the VM controller writes the VM's status
// twice: once before the sync reads the live state (through a cache that
// lags) and once more before its apply reaches the API server. The apply,
// conditioned on the resourceVersion the sync saw, is refused, sent again
// on the current one, changes nothing and is neither "configured" nor
// drift.
func TestNoDriftFromALaggingCache(t *testing.T) {
	c, _, _ := newClient(t)
	lag := &laggingReader{Reader: c, lists: map[string]runtime.Object{}}
	p := reconciler.NewPipeline(c, lag, testOptions(false))
	r := renderWorkloads(t, map[string]string{"w.yaml": wlNamespace + "---\n" + wlVM})
	doSync(t, p, r)
	status := func() {
		gen := obj(t, c, vmAPI, "VirtualMachine", "vms", "web").GetGeneration()
		writeAs(t, c, "virt-controller", vmAPI, "VirtualMachine", "vms", "web", true, fmt.Sprintf(vmControllerStatus, gen))
	}
	status()
	owner := p.OwnerLabels(r.HyperConverged.GetNamespace(), r.HyperConverged.GetName())
	var gvks []schema.GroupVersionKind
	for _, o := range r.Objects() {
		gvks = append(gvks, o.GroupVersionKind())
	}
	if _, err := reconciler.ReadLive(context.Background(), lag, gvks, owner); err != nil { // the cache's view
		t.Fatal(err)
	}
	writeAs(t, c, "virt-controller", vmAPI, "VirtualMachine", "vms", "web", true, `{"status": {"printableStatus": "Migrating"}}`)
	lag.replay = true
	res := doSync(t, p, r)
	if a := actions(res.ChangeSet)["VirtualMachine/vms/web"]; a != ssa.UnchangedAction || len(res.Drifted) != 0 {
		t.Errorf("VM %s, Drifted %v; want unchanged and no drift", a, res.Drifted)
	}
	if res.Writes < 2 {
		t.Errorf("%d writes, want the VM's apply refused on the stale resourceVersion, then sent again", res.Writes)
	}
}

// TestUninstallWorkloadsFirst: deleting everything a config applied (a
// Sync with deletionPolicy Delete) deletes the workloads first and waits
// for them, while the stack whose VM controller removes a VM's finalizer
// is still there; the KubeVirt CR goes only after the VM is gone.
func TestUninstallWorkloadsFirst(t *testing.T) {
	c, _, mk := newClient(t)
	p := mk(testOptions(false))
	ctx := context.Background()
	doSync(t, p, renderWorkloads(t, map[string]string{"w.yaml": wlNamespace + "---\n" + wlVM}))
	writeAs(t, c, "virt-controller", vmAPI, "VirtualMachine", "vms", "web", false, `{"metadata": {"finalizers": ["kubevirt.io/virtualMachineControllerFinalize"]}}`)
	store := reconciler.ConfigMapStore{Client: c, Reader: c, Namespace: hcNS, Name: hcNS}
	type result struct {
		cs  *ssa.ChangeSet
		err error
	}
	done := make(chan result, 1)
	go func() {
		cs, err := p.Uninstall(ctx, store, p.OwnerLabels(hcNS, hcNS))
		done <- result{cs, err}
	}()
	// The VM controller: once the VM is being deleted, the stack must
	// still be there; then it lets the VM go.
	controlplane.Eventually(t, time.Minute, func() bool {
		vm := obj(t, c, vmAPI, "VirtualMachine", "vms", "web")
		return vm != nil && vm.GetDeletionTimestamp() != nil
	})
	if kv := obj(t, c, kvAPI, "KubeVirt", hcNS, kvName); kv == nil || kv.GetDeletionTimestamp() != nil {
		t.Errorf("KubeVirt CR %v while the VM is being deleted, want it untouched", kv)
	}
	writeAs(t, c, "virt-controller", vmAPI, "VirtualMachine", "vms", "web", false, `{"metadata": {"finalizers": null}}`)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	var order []string
	for _, e := range res.cs.Entries {
		order = append(order, e.Subject)
	}
	if len(order) == 0 || order[0] != "VirtualMachine/vms/web" {
		t.Errorf("uninstall order %v, want the VM first", order)
	}
	if obj(t, c, kvAPI, "KubeVirt", hcNS, kvName) != nil {
		t.Error("KubeVirt CR not deleted")
	}
}
