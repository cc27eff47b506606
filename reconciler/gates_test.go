package reconciler_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/reconciler"
	"github.com/converge-dev/converge/reconciler/inventory"
)

var openshift = map[string]any{"platform": "openshift"}

// external are the edits making the example's HyperConverged external
// mode, where the graph derives the SSP on OpenShift (native mode has no
// SSP operator yet) and the test plays the upstream operators.
var external = []string{"namespace: kubevirt-hyperconverged\n", "namespace: kubevirt-hyperconverged\n  annotations: {converge.dev/operators: external}\n"}

const (
	cdiAPI  = "cdi.kubevirt.io/v1beta1"
	cdiName = "cdi-kubevirt-hyperconverged"
	kvAPI   = "kubevirt.io/v1"
	kvName  = "kubevirt-kubevirt-hyperconverged"
	hppAPI  = "hostpathprovisioner.kubevirt.io/v1beta1"
	hppName = "hostpath-provisioner"
	sspAPI  = "ssp.kubevirt.io/v1beta3"
	sspName = "ssp-kubevirt-hyperconverged"
)

// TestHealthGates drives the example (external mode and OpenShift facts,
// so SSP exists)
// with health gates on, the test acting as the operators: hpp (dependsOn
// cdi) and ssp (dependsOn virt, cdi) are applied only once the test
// marks CDI, then KubeVirt, Available; a deferred component keeps its
// applied objects (no prune, no update) while its dependency is Degraded.
func TestHealthGates(t *testing.T) {
	c, p, _ := newClient(t)
	r := renderExample(t, map[string][]string{"hyperconverged.yaml": external}, openshift)
	syncs, writes := 0, 0
	run := func() *reconciler.Result {
		t.Helper()
		res := doSync(t, p, r)
		syncs++
		writes += res.Writes
		return res
	}

	// 1. First sync: everything but hpp and ssp.
	res := run()
	if !res.Waiting || res.RequeueAfter <= 0 {
		t.Errorf("Waiting = %v, RequeueAfter = %s; want true and a requeue", res.Waiting, res.RequeueAfter)
	}
	var order []string
	for _, ch := range res.Components {
		order = append(order, ch.Name)
	}
	if got := strings.Join(order, ","); got != "hco,aaq,cdi,cnao,filerestore,migration,virt,hpp,ssp" {
		t.Errorf("Components order = %s, want graph order", got)
	}
	h := health(res)
	for name, want := range map[string]reconciler.Health{
		"hco": reconciler.Healthy, "cdi": reconciler.Progressing, "virt": reconciler.Progressing,
		"hpp": reconciler.Waiting, "ssp": reconciler.Waiting,
	} {
		if h[name].Health != want {
			t.Errorf("%s = %s (%s), want %s", name, h[name].Health, h[name].Message, want)
		}
	}
	if want := "waiting for cdi: CDI/" + cdiName + " has no conditions"; h["hpp"].Message != want {
		t.Errorf("hpp message = %q, want %q", h["hpp"].Message, want)
	}
	if !strings.Contains(h["ssp"].Message, "waiting for virt: KubeVirt/"+hcNS+"/"+kvName) {
		t.Errorf("ssp message = %q, want it to name the KubeVirt CR", h["ssp"].Message)
	}
	if obj(t, c, hppAPI, "HostPathProvisioner", "", hppName) != nil || obj(t, c, sspAPI, "SSP", hcNS, sspName) != nil {
		t.Fatal("hpp or ssp applied before their dependencies are healthy")
	}
	if a := actions(res.ChangeSet)["HostPathProvisioner/"+hppName]; a != ssa.SkippedAction {
		t.Errorf("HostPathProvisioner action = %q, want skipped", a)
	}
	// Every inventory entry names the component that derives it.
	for _, e := range res.Inventory.Entries {
		if e.Component == "" {
			t.Errorf("inventory entry %s has no component", e.ID)
		}
	}
	for id, want := range map[string]string{
		"_kubevirts.kubevirt.io_apiextensions.k8s.io_CustomResourceDefinition": reconciler.CRDsComponent,
		hcNS + "_kubevirt-hyperconverged_hco.kubevirt.io_HyperConverged":       "hco",
		hcNS + "_" + kvName + "_kubevirt.io_KubeVirt":                          "virt",
		"_" + cdiName + "_cdi.kubevirt.io_CDI":                                 "cdi",
	} {
		if got := inventory.Index(res.Inventory)[id].Component; got != want {
			t.Errorf("inventory entry %s: component %q, want %q", id, got, want)
		}
	}

	// 2. CDI becomes Available: hpp is applied, ssp still waits for virt.
	setConditions(t, c, cdiAPI, "CDI", "", cdiName, metav1.ConditionTrue, metav1.ConditionFalse, "")
	res = run()
	h = health(res)
	if obj(t, c, hppAPI, "HostPathProvisioner", "", hppName) == nil {
		t.Fatalf("HostPathProvisioner not applied after CDI became Available (hpp: %+v)", h["hpp"])
	}
	if h["cdi"].Health != reconciler.Healthy || h["hpp"].Health != reconciler.Progressing {
		t.Errorf("cdi = %+v, hpp = %+v; want Healthy and Progressing", h["cdi"], h["hpp"])
	}
	if h["ssp"].Health != reconciler.Waiting || strings.Contains(h["ssp"].Message, "cdi") {
		t.Errorf("ssp = %+v, want Waiting for virt only", h["ssp"])
	}
	if obj(t, c, sspAPI, "SSP", hcNS, sspName) != nil {
		t.Fatal("SSP applied while KubeVirt is not Available")
	}

	// 3. KubeVirt too: ssp is applied; nothing waits any more.
	setConditions(t, c, kvAPI, "KubeVirt", hcNS, kvName, metav1.ConditionTrue, metav1.ConditionFalse, "")
	res = run()
	if res.Waiting || obj(t, c, sspAPI, "SSP", hcNS, sspName) == nil {
		t.Fatalf("after KubeVirt Available: Waiting = %v, SSP applied = %v; components %+v", res.Waiting, obj(t, c, sspAPI, "SSP", hcNS, sspName) != nil, res.Components)
	}
	t.Logf("gates on: %d syncs, %d write requests until every component was applied (the test marked CDI and KubeVirt Available in between)", syncs, writes)

	// 4. CDI degrades and the config changes the HostPathProvisioner: hpp
	// is deferred again; its applied object is neither pruned nor updated.
	setConditions(t, c, cdiAPI, "CDI", "", cdiName, metav1.ConditionTrue, metav1.ConditionTrue, "cdi-apiserver crashlooping")
	r = renderExample(t, map[string][]string{"hyperconverged.yaml": external, "hostpathprovisioner.yaml": {"path: /var/hpvolumes", "path: /var/other"}}, openshift)
	res = run()
	h = health(res)
	if h["cdi"].Health != reconciler.Failed || h["hpp"].Health != reconciler.Waiting ||
		!strings.Contains(h["hpp"].Message, "Degraded=True: cdi-apiserver crashlooping") {
		t.Errorf("cdi = %+v, hpp = %+v; want Failed and Waiting on the Degraded condition", h["cdi"], h["hpp"])
	}
	hpp := obj(t, c, hppAPI, "HostPathProvisioner", "", hppName)
	if hpp == nil {
		t.Fatal("deferred HostPathProvisioner was pruned")
	}
	if e, ok := inventory.Index(res.Inventory)["_"+hppName+"_hostpathprovisioner.kubevirt.io_HostPathProvisioner"]; !ok || e.Component != "hpp" {
		t.Errorf("deferred HostPathProvisioner: in the inventory %v, component %q; want kept, of component hpp", ok, e.Component)
	}
	if path := poolPath(hpp); path != "/var/hpvolumes" {
		t.Errorf("deferred HostPathProvisioner updated anyway: path %q", path)
	}
	// 5. CDI recovers: the change reaches the HostPathProvisioner.
	setConditions(t, c, cdiAPI, "CDI", "", cdiName, metav1.ConditionTrue, metav1.ConditionFalse, "")
	res = run()
	if a := actions(res.ChangeSet)["HostPathProvisioner/"+hppName]; a != ssa.ConfiguredAction {
		t.Errorf("HostPathProvisioner after CDI recovered = %q, want configured", a)
	}
	if path := poolPath(obj(t, c, hppAPI, "HostPathProvisioner", "", hppName)); path != "/var/other" {
		t.Errorf("HostPathProvisioner path = %q after CDI recovered, want /var/other", path)
	}

	// 6. A change of the KubeVirt CR's spec: its Available=True is of the
	// generation before until its operator reports the new one; virt is
	// Progressing and ssp waits meanwhile.
	kvGen := obj(t, c, kvAPI, "KubeVirt", hcNS, kvName).GetGeneration()
	r = renderExample(t, map[string][]string{"hyperconverged.yaml": slices.Concat(external, []string{"parallelMigrationsPerCluster: 5", "parallelMigrationsPerCluster: 7"}),
		"hostpathprovisioner.yaml": {"path: /var/hpvolumes", "path: /var/other"}}, openshift)
	res = run()
	h = health(res)
	want := fmt.Sprintf("KubeVirt/%s/%s generation %d not observed yet (observed %d)", hcNS, kvName, kvGen+1, kvGen)
	if h["virt"].Health != reconciler.Progressing || h["virt"].Message != want || h["ssp"].Health != reconciler.Waiting {
		t.Errorf("after a KubeVirt spec change: virt = %+v, ssp = %+v; want virt Progressing %q and ssp Waiting", h["virt"], h["ssp"], want)
	}
	setConditions(t, c, kvAPI, "KubeVirt", hcNS, kvName, metav1.ConditionTrue, metav1.ConditionFalse, "")
	res = run()
	if h = health(res); h["virt"].Health != reconciler.Healthy || h["ssp"].Health == reconciler.Waiting {
		t.Errorf("after the KubeVirt operator reported the new generation: virt = %+v, ssp = %+v; want Healthy and not Waiting", h["virt"], h["ssp"])
	}
}

func poolPath(u *unstructured.Unstructured) string {
	pools, _, _ := unstructured.NestedSlice(u.Object, "spec", "storagePools")
	if len(pools) == 0 {
		return ""
	}
	s, _ := pools[0].(map[string]any)["path"].(string)
	return s
}

// TestHealthGatesOff applies everything in one sync, operands or not.
func TestHealthGatesOff(t *testing.T) {
	c, _, mk := newClient(t)
	p := mk(testOptions(false))
	res := doSync(t, p, renderExample(t, map[string][]string{"hyperconverged.yaml": external}, openshift))
	if res.Waiting {
		t.Errorf("Waiting with gates off: %+v", res.Components)
	}
	if obj(t, c, hppAPI, "HostPathProvisioner", "", hppName) == nil || obj(t, c, sspAPI, "SSP", hcNS, sspName) == nil {
		t.Fatal("gates off: hpp or ssp not applied in the first sync")
	}
	for _, ch := range res.Components {
		if ch.Health == reconciler.Waiting {
			t.Errorf("%s Waiting with gates off", ch.Name)
		}
	}
	t.Logf("gates off: 1 sync, %d write requests until every component was applied", res.Writes)
}

// TestWaitOff applies a stage holding a Deployment, whose health only the
// (absent) Deployment controller would make Current: with Options.Wait
// the stage's kstatus wait fails the sync naming it; without, the sync
// succeeds, the later stages are applied and the component reports the
// Deployment Progressing from its real status (what a Sync with spec.wait
// false reports in status.components).
func TestWaitOff(t *testing.T) {
	deployment := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": hcNS},
			"spec": map[string]any{
				"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
					"spec":     map[string]any{"containers": []any{map[string]any{"name": "web", "image": "web:1"}}},
				},
			},
		}}
		return u
	}
	t.Run("wait", func(t *testing.T) {
		c, _, mk := newClient(t)
		o := testOptions(false)
		// every stage waits up to this, the CRDs' too: long enough for
		// them to be Established on a loaded machine (the Deployment never
		// becomes Current here)
		o.WaitTimeout = 15 * time.Second
		_, err := trySync(t, mk(o), withObjects(renderExample(t, nil, nil), deployment()))
		if err == nil || !strings.Contains(err.Error(), "Deployment/"+hcNS+"/web") {
			t.Fatalf("sync with Wait: %v, want a health check error naming the Deployment", err)
		}
		if obj(t, c, kvAPI, "KubeVirt", hcNS, kvName) != nil {
			t.Error("the stage after the failed wait was applied")
		}
	})
	t.Run("no wait", func(t *testing.T) {
		c, _, mk := newClient(t)
		o := testOptions(false)
		o.Wait = false
		res := doSync(t, mk(o), withObjects(renderExample(t, nil, nil), deployment()))
		if obj(t, c, kvAPI, "KubeVirt", hcNS, kvName) == nil {
			t.Error("the stage after the Deployment's was not applied")
		}
		h := health(res)
		if got := h["hco"]; got.Health != reconciler.Progressing || !strings.Contains(got.Message, "Deployment/"+hcNS+"/web InProgress") {
			t.Errorf("hco = %+v, want Progressing naming the Deployment InProgress", got)
		}
		// The CRDs stage was still waited for: the KubeVirt of the next
		// stage could be applied at all.
		if got := h["virt"]; got.Health != reconciler.Progressing {
			t.Errorf("virt = %+v, want Progressing (no operator)", got)
		}
	})
}

// olderCopies is a reader that lags as an informer cache does: it gives
// the copies in old for their keys, and reads the rest through Reader.
type olderCopies struct {
	client.Reader
	old map[client.ObjectKey]*unstructured.Unstructured
}

func (o olderCopies) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if u, ok := o.old[key]; ok {
		if out, isU := obj.(*unstructured.Unstructured); isU && out.GetKind() == u.GetKind() {
			u.DeepCopyInto(out)
			return nil
		}
	}
	return o.Reader.Get(ctx, key, obj, opts...)
}

// TestHealthOfAnOlderCopy: the controller reads health through its cache,
// which may not have seen the sync's own apply yet. An operand read at an
// older generation than the one applied is Progressing whatever its
// status says (its Available=True is of the spec before; a Sync was
// Ready before the KubeVirt operator saw a change), and what depends on
// it waits.
func TestHealthOfAnOlderCopy(t *testing.T) {
	c, p, _ := newClient(t)
	r := renderExample(t, map[string][]string{"hyperconverged.yaml": external}, openshift)
	doSync(t, p, r)
	setConditions(t, c, cdiAPI, "CDI", "", cdiName, metav1.ConditionTrue, metav1.ConditionFalse, "")
	setConditions(t, c, kvAPI, "KubeVirt", hcNS, kvName, metav1.ConditionTrue, metav1.ConditionFalse, "")
	if h := health(doSync(t, p, r)); h["virt"].Health != reconciler.Healthy {
		t.Fatalf("virt = %+v before the change, want Healthy", h["virt"])
	}
	before := obj(t, c, kvAPI, "KubeVirt", hcNS, kvName)
	lagging := reconciler.NewPipeline(c, olderCopies{Reader: c, old: map[client.ObjectKey]*unstructured.Unstructured{
		{Namespace: hcNS, Name: kvName}: before}}, testOptions(true))

	r = renderExample(t, map[string][]string{"hyperconverged.yaml": slices.Concat(external, []string{"parallelMigrationsPerCluster: 5", "parallelMigrationsPerCluster: 7"})}, openshift)
	h := health(doSync(t, lagging, r))
	want := fmt.Sprintf("KubeVirt/%s/%s: generation %d applied, not read back yet (read %d)", hcNS, kvName, before.GetGeneration()+1, before.GetGeneration())
	if h["virt"].Health != reconciler.Progressing || h["virt"].Message != want {
		t.Errorf("virt = %+v, want Progressing %q", h["virt"], want)
	}
	if h["ssp"].Health != reconciler.Waiting {
		t.Errorf("ssp = %+v, want Waiting for virt", h["ssp"])
	}
}
