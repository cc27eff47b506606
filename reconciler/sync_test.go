package reconciler_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/gitops/source"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/reconciler"
)

// gitRepo is a real Git repository holding a copy of testdata/example.
type gitRepo struct {
	t   *testing.T
	dir string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	r := &gitRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	for _, f := range []string{"hyperconverged.yaml", "hostpathprovisioner.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "example", f))
		if err != nil {
			t.Fatal(err)
		}
		r.write(f, string(b))
	}
	r.commit("example")
	return r
}

func (r *gitRepo) git(args ...string) {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Dir = r.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func (r *gitRepo) write(name, content string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *gitRepo) commit(msg string) { r.git("add", "-A"); r.git("commit", "-q", "-m", msg) }

func (r *gitRepo) edit(name, old, new string) {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, name))
	if err != nil {
		r.t.Fatal(err)
	}
	s := strings.Replace(string(b), old, new, 1)
	if s == string(b) {
		r.t.Fatalf("%s: %q not found", name, old)
	}
	r.write(name, s)
}

// syncer is the main job without a controller: fetch the repository
// (package gitops), render it (package graph, schema-default facts) and
// run Pipeline.Sync, keeping the last result. A fetch or render error is
// passed to the Pipeline as Input.Err with the last HyperConverged
// rendered, as package synccontroller does, so it is reported on the HC.
type syncer struct {
	cfg     *rest.Config
	c       client.Client
	fetcher *source.Fetcher
	src     source.Source
	engine  *graph.Engine
	p       *reconciler.Pipeline
	hc      types.NamespacedName
	res     *reconciler.Result
	err     error
}

func newSyncer(t *testing.T, repo *gitRepo) *syncer {
	t.Helper()
	cfg := startEnv(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	return &syncer{cfg: cfg, c: c, engine: e,
		fetcher: source.NewFetcher(source.Options{CacheDir: t.TempDir()}),
		src:     source.Source{URL: repo.dir},
		// Gates off: this story (first sync creates everything, prune,
		// failures) is not about health; TestHealthGates is.
		p: reconciler.NewPipeline(c, nil, testOptions(false)),
	}
}

func (sy *syncer) sync(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sy.res, sy.err = sy.p.Sync(ctx, sy.input(ctx))
}

// input fetches and renders the repository's HEAD, or returns the error
// as Input.Err.
func (sy *syncer) input(ctx context.Context) reconciler.Input {
	art, err := sy.fetcher.Fetch(ctx, sy.src)
	if err != nil {
		return reconciler.Input{Err: err, HC: sy.hc}
	}
	fail := func(err error) reconciler.Input {
		return reconciler.Input{Revision: art.Revision, Err: fmt.Errorf("revision %s: %w", art.Revision, err), HC: sy.hc}
	}
	dir, err := art.Path(".")
	if err != nil {
		return fail(err)
	}
	cfg, err := sy.engine.LoadConfig(dir)
	if err != nil {
		return fail(err)
	}
	r, err := sy.engine.Render(cfg, nil)
	if err != nil {
		return fail(err)
	}
	sy.hc = types.NamespacedName{Namespace: r.HyperConverged.GetNamespace(), Name: r.HyperConverged.GetName()}
	return reconciler.Input{Rendered: r, Revision: art.Revision}
}

// resourceVersions returns the resourceVersion of every object converge
// owns (and the inventory), by kind/namespace/name.
func (sy *syncer) resourceVersions(t *testing.T, cs *ssa.ChangeSet) map[string]string {
	t.Helper()
	c, err := client.New(sy.cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range cs.Entries {
		u := &unstructured.Unstructured{}
		gv, err := schema.ParseGroupVersion(e.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		// ssa's delete entries carry only the version: take the group
		// from the object's identity.
		u.SetGroupVersionKind(e.ObjMetadata.GroupKind.WithVersion(gv.Version))
		err = c.Get(context.Background(), client.ObjectKey{Namespace: e.ObjMetadata.Namespace, Name: e.ObjMetadata.Name}, u)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[e.Subject] = u.GetResourceVersion()
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "kubevirt-hyperconverged", Name: reconciler.InventoryName("kubevirt-hyperconverged")}, cm); err != nil {
		t.Fatal(err)
	}
	out["inventory"] = cm.ResourceVersion
	return out
}

func actions(cs *ssa.ChangeSet) map[string]ssa.Action {
	m := map[string]ssa.Action{}
	for _, e := range cs.Entries {
		m[e.Subject] = e.Action
	}
	return m
}

func hcCondition(t *testing.T, c client.Client, typ string) (status, reason, message string) {
	t.Helper()
	hc := &unstructured.Unstructured{}
	hc.SetAPIVersion("hco.kubevirt.io/v1")
	hc.SetKind("HyperConverged")
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "kubevirt-hyperconverged", Name: "kubevirt-hyperconverged"}, hc); err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(hc.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == typ {
			return m["status"].(string), m["reason"].(string), m["message"].(string)
		}
	}
	return "", "", ""
}

// TestSyncFromGit runs the main job (fetch, render, Pipeline.Sync) against
// a real API server and a real Git repository: first sync, no-op resync,
// prune, invalid commit reported on the HC, recovery, re-added object.
func TestSyncFromGit(t *testing.T) {
	repo := newGitRepo(t)
	sy := newSyncer(t, repo)

	// 1. First sync creates every object.
	sy.sync(t)
	if sy.err != nil {
		t.Fatalf("first sync: %v", sy.err)
	}
	first := actions(sy.res.ChangeSet)
	for _, want := range []string{
		"CustomResourceDefinition/hyperconvergeds.hco.kubevirt.io",
		"CustomResourceDefinition/kubevirts.kubevirt.io",
		"Namespace/kubevirt-hyperconverged",
		"HyperConverged/kubevirt-hyperconverged/kubevirt-hyperconverged",
		"PriorityClass/kubevirt-cluster-critical",
		"KubeVirt/kubevirt-hyperconverged/kubevirt-kubevirt-hyperconverged",
		"CDI/cdi-kubevirt-hyperconverged",
		"NetworkAddonsConfig/cluster",
		"HostPathProvisioner/hostpath-provisioner",
		// Native mode derives the SSP on plain Kubernetes too, for
		// converge's SSP operator (HCO creates it on OpenShift only).
		"SSP/kubevirt-hyperconverged/ssp-kubevirt-hyperconverged",
	} {
		if first[want] != ssa.CreatedAction {
			t.Errorf("first sync: %s: got %q, want created", want, first[want])
		}
	}
	// The KubeVirt CR is controlled by the HC, as HCO does.
	kv := &unstructured.Unstructured{}
	kv.SetAPIVersion("kubevirt.io/v1")
	kv.SetKind("KubeVirt")
	if err := sy.c.Get(context.Background(), client.ObjectKey{Namespace: "kubevirt-hyperconverged", Name: "kubevirt-kubevirt-hyperconverged"}, kv); err != nil {
		t.Fatal(err)
	}
	if refs := kv.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "HyperConverged" || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("KubeVirt ownerReferences = %+v, want a controller reference to the HyperConverged", refs)
	}
	// No operator runs here: the operand CRs report no conditions, and
	// the HC says so as HCO would.
	if s, reason, _ := hcCondition(t, sy.c, "Available"); s != "False" || !strings.HasSuffix(reason, "Conditions") {
		t.Errorf("Available = %s/%s, want False/<Kind>Conditions", s, reason)
	}
	if s, _, _ := hcCondition(t, sy.c, "ReconcileComplete"); s != "True" {
		t.Errorf("ReconcileComplete = %s, want True", s)
	}

	// 2. A resync of the unchanged revision writes nothing.
	before := sy.resourceVersions(t, sy.res.ChangeSet)
	sy.sync(t)
	if sy.err != nil {
		t.Fatalf("resync: %v", sy.err)
	}
	if sy.res.Writes != 0 {
		t.Errorf("no-op resync sent %d write requests, want 0", sy.res.Writes)
	}
	after := sy.resourceVersions(t, sy.res.ChangeSet)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("no-op resync changed %s: resourceVersion %s → %s", k, v, after[k])
		}
	}

	// 3. Removing an object from the config prunes it.
	repo.git("rm", "-q", "hostpathprovisioner.yaml")
	repo.commit("drop the HostPathProvisioner")
	sy.sync(t)
	if sy.err != nil {
		t.Fatalf("sync after removal: %v", sy.err)
	}
	if a := actions(sy.res.ChangeSet)["HostPathProvisioner/hostpath-provisioner"]; a != ssa.DeletedAction {
		t.Errorf("HostPathProvisioner: got %q, want deleted", a)
	}
	hpp := &unstructured.Unstructured{}
	hpp.SetAPIVersion("hostpathprovisioner.kubevirt.io/v1beta1")
	hpp.SetKind("HostPathProvisioner")
	fresh, err := client.New(sy.cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.Get(context.Background(), client.ObjectKey{Name: "hostpath-provisioner"}, hpp); !apierrors.IsNotFound(err) {
		t.Errorf("HostPathProvisioner still there after prune: %v", err)
	}
	good := sy.res.Revision

	// 4. An invalid commit changes nothing and is reported on the HC.
	goodCS := sy.res.ChangeSet
	before = sy.resourceVersions(t, goodCS)
	repo.edit("hyperconverged.yaml", "uninstallStrategy: BlockUninstallIfWorkloadsExist", "uninstallStrategy: KeepEverything")
	repo.commit("bad uninstallStrategy")
	sy.sync(t)
	if sy.err == nil || !strings.Contains(sy.err.Error(), "spec.uninstallStrategy") {
		t.Fatalf("invalid commit: err = %v, want one naming spec.uninstallStrategy", sy.err)
	}
	after = sy.resourceVersions(t, goodCS)
	for k, v := range before {
		if k == "HyperConverged/kubevirt-hyperconverged/kubevirt-hyperconverged" {
			continue // its status changes: that is the report
		}
		if after[k] != v {
			t.Errorf("invalid commit changed %s: resourceVersion %s → %s", k, v, after[k])
		}
	}
	s, reason, msg := hcCondition(t, sy.c, "ReconcileComplete")
	if s != "False" || reason != "ReconcileFailed" || !strings.Contains(msg, "spec.uninstallStrategy") {
		t.Errorf("ReconcileComplete = %s/%s %q, want False/ReconcileFailed naming spec.uninstallStrategy", s, reason, msg)
	}

	// 5. Fixing the commit recovers and the revision moves on.
	repo.edit("hyperconverged.yaml", "uninstallStrategy: KeepEverything", "uninstallStrategy: RemoveWorkloads")
	repo.commit("fix uninstallStrategy")
	sy.sync(t)
	if sy.err != nil {
		t.Fatalf("sync after fix: %v", sy.err)
	}
	if sy.res.Revision == good {
		t.Errorf("revision did not move on after the fix")
	}
	a := actions(sy.res.ChangeSet)
	for _, want := range []string{"KubeVirt/kubevirt-hyperconverged/kubevirt-kubevirt-hyperconverged", "CDI/cdi-kubevirt-hyperconverged"} {
		if a[want] != ssa.ConfiguredAction {
			t.Errorf("after uninstallStrategy change: %s = %q, want configured", want, a[want])
		}
	}
	if a["NetworkAddonsConfig/cluster"] != ssa.UnchangedAction {
		t.Errorf("NetworkAddonsConfig = %q, want unchanged", a["NetworkAddonsConfig/cluster"])
	}
	if s, _, _ := hcCondition(t, sy.c, "ReconcileComplete"); s != "True" {
		t.Errorf("ReconcileComplete after fix = %s, want True", s)
	}

	// 6. Putting a pruned object back creates it again.
	b, err := os.ReadFile(filepath.Join("..", "testdata", "example", "hostpathprovisioner.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	repo.write("hostpathprovisioner.yaml", string(b))
	repo.commit("bring the HostPathProvisioner back")
	sy.sync(t)
	if sy.err != nil {
		t.Fatalf("sync after re-adding: %v", sy.err)
	}
	if a := actions(sy.res.ChangeSet)["HostPathProvisioner/hostpath-provisioner"]; a != ssa.CreatedAction {
		t.Errorf("re-added HostPathProvisioner = %q, want created", a)
	}
}
