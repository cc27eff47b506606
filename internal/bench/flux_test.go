package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/bench/measure"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/graph/facts"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/gitserver"
)

// fluxControllers are the Flux binaries hack/flux/build.sh puts in
// bin/flux that BenchmarkFlux runs, with their pinned module versions.
var fluxControllers = map[string]string{
	"source-controller":    "github.com/fluxcd/source-controller@v1.9.1",
	"kustomize-controller": "github.com/fluxcd/kustomize-controller@v1.9.4",
}

const (
	// fluxNoops and fluxDrifts are the no-op reconciles and drift
	// corrections each side of BenchmarkFlux measures (their medians).
	fluxNoops, fluxDrifts = 5, 3
	// fluxDriftInterval is the Kustomization's interval while drift is
	// measured: Flux finds drift only when its interval runs a reconcile.
	fluxDriftInterval = 10 * time.Second
)

// driftDelay is how long after the previous correction drift i is made:
// (i+½)/fluxDrifts of fluxDriftInterval, so that Flux's drifts fall at
// spread phases of its interval instead of right after the reconcile that
// corrected the previous one (which would always wait a whole interval).
// The same on converge's side.
func driftDelay(i int) time.Duration {
	return fluxDriftInterval * time.Duration(2*i+1) / time.Duration(2*fluxDrifts)
}

// sideFigures are what BenchmarkFlux measures of one side.
type sideFigures struct {
	commit, noop, drift []time.Duration
	// noopRequests are the API requests of each no-op reconcile.
	noopRequests []float64
	// idleRSS and steadyRSS are the resident memory in MiB of the
	// side's controllers summed, idle before any Sync/Kustomization and
	// after the runs; rssDetail names each process's share.
	idleRSS, steadyRSS float64
	rssDetail          string
	// applyNoop and applyNoopRequests are kubectl apply --server-side of
	// the unchanged rendered set (flux side only).
	applyNoop         []time.Duration
	applyNoopRequests []float64
	// objects is the size of the rendered set (flux side only).
	objects int
}

// BenchmarkFlux runs converge beside Flux (source-controller v1.9.1 and
// kustomize-controller v1.9.4 from bin/flux, built by `make flux`), each
// on its own fresh API server from internal/testing/controlplane with the
// same git http-backend on loopback serving its repository, and prints a
// table of both sides with ratios:
//
//   - converge: converge-controller with a Sync of testdata/example (as
//     BenchmarkCommitToApplied), spec.wait false, interval 1h.
//   - flux: a GitRepository (interval 1h) and a Kustomization (interval 1h,
//     prune) of a repository holding the example rendered by converge's
//     engine into one multi-document all.yaml, what a Flux user commits
//     (each commit re-renders it). The controllers run as processes with
//     their defaults (--concurrent 4, --concurrent-ssa 4), no leader
//     election.
//
// Per side: commit → applied for each benchmark iteration (converge: a
// signed push to its receiver; Flux: the reconcile.fluxcd.io/requestedAt
// annotation on the GitRepository, as notification-controller's Receiver
// would set it; timed to Ready at the new revision), a no-op reconcile
// requested by annotation (converge.dev/reconcile-requested-at on the
// Sync, reconcile.fluxcd.io/requestedAt on the Kustomization; its time and
// its API requests: kube-apiserver's apiserver_request_total delta without
// lease/endpoint background and the harness's own requests), drift
// reverted (another field manager changes the KubeVirt CR's
// spec.uninstallStrategy; converge reverts it on the watch event, Flux at
// its next interval, set to 10s for this; see driftDelay for when each
// drift is made), and the controllers' resident
// memory idle and after the runs. On the Flux side's API server, kubectl
// apply --server-side of the unchanged all.yaml (bin/kubectl, built at the
// repository's Kubernetes version) is the no-op anchor. Skips when
// bin/flux lacks the controllers or bin/kubectl is missing.
func BenchmarkFlux(b *testing.B) {
	bin, err := controlplane.BinDir()
	if err != nil {
		b.Fatal(err)
	}
	fluxDir := filepath.Join(bin, "flux")
	if err := fluxMissing(fluxDir, fluxControllers); err != nil {
		b.Skipf("%v: run `make flux` (builds them from the Go module proxy, tens of minutes cold)", err)
	}
	kubectl := filepath.Join(bin, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		b.Skipf("no kubectl in %s: run `make %s`", bin, "bin/kubectl")
	}
	var conv, flux sideFigures
	b.Run("converge", func(b *testing.B) { conv = convergeSide(b, buildController(b)) })
	b.Run("flux", func(b *testing.B) { flux = fluxSide(b, fluxDir, kubectl) })
	if len(conv.commit) == 0 || len(flux.commit) == 0 {
		return
	}
	rows := []measure.Row{
		{What: "commit → applied (median)", Unit: "ms", Converge: measure.Median(conv.commit), Other: measure.Median(flux.commit)},
		{What: "no-op reconcile (median)", Unit: "ms", Converge: measure.Median(conv.noop), Other: measure.Median(flux.noop)},
		{What: "no-op reconcile, API requests", Unit: "", Converge: measure.MedianOf(conv.noopRequests), Other: measure.MedianOf(flux.noopRequests)},
		{What: fmt.Sprintf("drift reverted (Flux: interval %s)", fluxDriftInterval), Unit: "ms", Converge: measure.Median(conv.drift), Other: measure.Median(flux.drift)},
		{What: "RSS idle, all controllers", Unit: "MiB", Converge: conv.idleRSS, Other: flux.idleRSS},
		{What: "RSS steady, all controllers", Unit: "MiB", Converge: conv.steadyRSS, Other: flux.steadyRSS},
	}
	anchor := []measure.Row{
		{What: "no-op: converge's reconcile vs kubectl apply --server-side of the unchanged set (median)", Unit: "ms", Converge: measure.Median(conv.noop), Other: measure.Median(flux.applyNoop)},
		{What: "no-op, API requests", Unit: "", Converge: measure.MedianOf(conv.noopRequests), Other: measure.MedianOf(flux.applyNoopRequests)},
	}
	// Printed, not logged: `make bench` shows it without -v.
	fmt.Printf("\nconverge vs Flux, the example's %d objects (%d commits each; medians of %d no-ops, %d drifts; steady RSS: converge %s; Flux %s):\n%s\n",
		flux.objects, len(conv.commit), fluxNoops, fluxDrifts, conv.rssDetail, flux.rssDetail, measure.Table("Flux", rows))
	fmt.Printf("the anchor, kubectl apply --server-side --force-conflicts as Flux's field manager, discovery cached (a process per apply):\n%s\n",
		measure.Table("kubectl", anchor))
}

// fluxMissing says which of controllers (name → module@version) dir lacks
// or holds at another version than its version stamp <name>.version, or
// whose CRDs are not in dir/crds/<name>; nil when all are there.
func fluxMissing(dir string, controllers map[string]string) error {
	var missing []string
	for name, want := range controllers {
		stamp, err := os.ReadFile(filepath.Join(dir, name+".version"))
		crds, _ := filepath.Glob(filepath.Join(dir, "crds", name, "*.yaml"))
		switch {
		case err != nil:
			missing = append(missing, name+" (no "+name+".version)")
		case strings.TrimSpace(string(stamp)) != want:
			missing = append(missing, fmt.Sprintf("%s (built %s, want %s)", name, strings.TrimSpace(string(stamp)), want))
		case len(crds) == 0:
			missing = append(missing, name+" (no CRDs in crds/"+name+")")
		default:
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode()&0o111 == 0 {
				missing = append(missing, name+" (no executable)")
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("%s lacks %s", dir, strings.Join(missing, ", "))
}

// apiCounter reads kube-apiserver's request count through a client whose
// own requests it counts, so that a delta leaves the harness out.
type apiCounter struct {
	http *http.Client
	host string
	own  *counter
	c    client.Client
}

// newAPICounter returns an apiCounter of e, whose client c (with the
// types of like's scheme, client-go's when like is nil, and unstructured)
// is the one to use for every request of the harness during a
// measurement.
func newAPICounter(b *testing.B, e *controlplane.Env, like client.Client) *apiCounter {
	own := &counter{}
	cfg := rest.CopyConfig(e.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { own.rt = rt; return own })
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	opts := client.Options{HTTPClient: hc}
	if like != nil {
		opts.Scheme = like.Scheme()
	}
	c, err := client.New(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	return &apiCounter{http: hc, host: strings.TrimSuffix(cfg.Host, "/"), own: own, c: c}
}

// mark is a point of an apiCounter's count: the API server's total and
// the harness's own requests before it was read.
type mark struct{ server, own float64 }

// mark reads the API server's request count now.
func (a *apiCounter) mark(b *testing.B) mark {
	own := float64(a.own.n.Load())
	resp, err := a.http.Get(a.host + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := measure.Requests(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return mark{server: n, own: own}
}

// since returns the API requests between m0 and m1 that the harness did
// not send.
func since(m0, m1 mark) float64 { return (m1.server - m0.server) - (m1.own - m0.own) }

// renderYAML loads and renders the config in dir with f and returns the
// objects as one multi-document YAML file, in apply order, and the
// objects.
func renderYAML(b *testing.B, engine *graph.Engine, dir string, f map[string]any) (string, []*unstructured.Unstructured) {
	cfg, err := engine.LoadConfig(dir)
	if err != nil {
		b.Fatal(err)
	}
	r, err := engine.Render(cfg, f)
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	objs := r.Objects()
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			b.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(y)
	}
	return buf.String(), objs
}

// kubeVirtCR returns the KubeVirt CR of objs, the drift target.
func kubeVirtCR(b *testing.B, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == "KubeVirt" {
			return o
		}
	}
	b.Fatal("the rendered example has no KubeVirt CR")
	return nil
}

// drift changes spec.uninstallStrategy of the KubeVirt CR like (read from
// the cluster) as field manager "someone-else" and returns how long until
// it reads back as like has it, polling every 10 ms.
func drift(b *testing.B, c client.Client, like *unstructured.Unstructured, timeout time.Duration, logs func() string) time.Duration {
	ctx := context.Background()
	want, _, _ := unstructured.NestedString(like.Object, "spec", "uninstallStrategy")
	if want == "" {
		b.Fatalf("KubeVirt %s has no spec.uninstallStrategy", like.GetName())
	}
	other := "RemoveWorkloads"
	if want == other {
		other = "BlockUninstallIfWorkloadsExist"
	}
	kv := &unstructured.Unstructured{}
	kv.SetGroupVersionKind(like.GroupVersionKind())
	key := client.ObjectKeyFromObject(like)
	if err := c.Get(ctx, key, kv); err != nil {
		b.Fatal(err)
	}
	_ = unstructured.SetNestedField(kv.Object, other, "spec", "uninstallStrategy")
	start := time.Now()
	if err := c.Update(ctx, kv, client.FieldOwner("someone-else")); err != nil {
		b.Fatal(err)
	}
	for time.Since(start) < timeout {
		if c.Get(ctx, key, kv) == nil {
			if v, _, _ := unstructured.NestedString(kv.Object, "spec", "uninstallStrategy"); v == want {
				return time.Since(start)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("KubeVirt %s: spec.uninstallStrategy not reverted to %s within %s\n%s", key, want, timeout, logs())
	return 0
}

// convergeSide measures converge-controller (see BenchmarkFlux).
func convergeSide(b *testing.B, exe string) sideFigures {
	e, c := benchCluster(b)
	api := newAPICounter(b, e, c)
	repo := exampleRepo(b)
	git := gitserver.NewHTTP(b, filepath.Dir(repo.Dir), gitserver.HTTPOptions{})
	run := startConverge(b, exe, e, c, git, repo)
	settledScrape(b, run.metricsURL)
	var s sideFigures
	s.idleRSS = run.idleRSS
	n := 5
	for b.Loop() {
		s.commit = append(s.commit, run.commit(b, repo, n))
		n++
	}
	b.StopTimer()
	logs := func() string { l, _ := os.ReadFile(filepath.Join(run.dir, "controller.log")); return string(l) }
	ctx := context.Background()
	for i := range fluxNoops {
		time.Sleep(500 * time.Millisecond)
		at := fmt.Sprintf("noop-%d", i)
		m0 := api.mark(b)
		start := time.Now()
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ReconcileRequestAnnotation, at)
		if err := api.c.Patch(ctx, &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: run.key.Namespace, Name: run.key.Name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			b.Fatal(err)
		}
		s.noop = append(s.noop, waitFor(b, start, time.Minute, logs, func() bool {
			sync := &v1alpha1.Sync{}
			return api.c.Get(ctx, run.key, sync) == nil && sync.Status.LastHandledReconcileAt == at &&
				apimeta.IsStatusConditionTrue(sync.Status.Conditions, v1alpha1.ReadyCondition)
		}))
		s.noopRequests = append(s.noopRequests, since(m0, api.mark(b)))
	}
	engine, err := graph.NewEngine()
	if err != nil {
		b.Fatal(err)
	}
	f, err := facts.Discover(ctx, c, c.RESTMapper())
	if err != nil {
		b.Fatal(err)
	}
	_, objs := renderYAML(b, engine, repo.Dir, f)
	kv := kubeVirtCR(b, objs)
	for i := range fluxDrifts {
		time.Sleep(driftDelay(i))
		s.drift = append(s.drift, drift(b, c, kv, time.Minute, logs))
	}
	time.Sleep(2 * time.Second)
	s.steadyRSS = rssMiB(b, run.cmd.Process.Pid)
	s.rssDetail = rssDetail(b, "converge-controller", run.cmd.Process.Pid)
	reportSide(b, s)
	return s
}

// fluxProcess is a Flux controller started by startFlux.
type fluxProcess struct {
	name string
	cmd  *exec.Cmd
	log  string
}

// startFlux runs the Flux controller bin/flux/name with kubeconfig,
// loopback addresses for its metrics and health endpoints plus args, its
// output in dir/name.log, and returns once its /readyz answers.
func startFlux(b *testing.B, fluxDir, name, kubeconfig, dir string, args ...string) *fluxProcess {
	health := controlplane.FreePort(b)
	args = append([]string{"--enable-leader-election=false", "--watch-all-namespaces",
		fmt.Sprintf("--metrics-addr=127.0.0.1:%d", controlplane.FreePort(b)),
		fmt.Sprintf("--health-addr=127.0.0.1:%d", health)}, args...)
	cmd := exec.Command(filepath.Join(fluxDir, name), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "RUNTIME_NAMESPACE=flux-system")
	p := &fluxProcess{name: name, cmd: cmd, log: filepath.Join(dir, name+".log")}
	out, err := os.Create(p.log)
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); out.Close() })
	ok := false
	for start := time.Now(); time.Since(start) < time.Minute && !ok; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if err == nil {
			resp.Body.Close()
			ok = resp.StatusCode == http.StatusOK
		}
	}
	if !ok {
		l, _ := os.ReadFile(p.log)
		b.Fatalf("%s not ready within a minute:\n%s", name, l)
	}
	return p
}

// fluxSide measures Flux's source-controller and kustomize-controller (see
// BenchmarkFlux).
func fluxSide(b *testing.B, fluxDir, kubectl string) sideFigures {
	e, c := benchCluster(b)
	api := newAPICounter(b, e, c)
	ctx := context.Background()
	dir := b.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := e.Kubeconfig(kubeconfig); err != nil {
		b.Fatal(err)
	}

	// The rendered example, discovered on the bare API server as
	// converge's side discovers it.
	engine, err := graph.NewEngine()
	if err != nil {
		b.Fatal(err)
	}
	f, err := facts.Discover(ctx, c, c.RESTMapper())
	if err != nil {
		b.Fatal(err)
	}
	config := exampleRepo(b)
	all, objs := renderYAML(b, engine, config.Dir, f)
	kvLike := kubeVirtCR(b, objs)
	s := sideFigures{objects: len(objs)}
	repo := gitserver.NewRepo(b, b.TempDir(), "rendered", "main")
	head := repo.Commit(b, "rendered example", map[string]string{"all.yaml": all})
	git := gitserver.NewHTTP(b, filepath.Dir(repo.Dir), gitserver.HTTPOptions{})

	for name := range fluxControllers {
		files, _ := filepath.Glob(filepath.Join(fluxDir, "crds", name, "*.yaml"))
		for _, file := range files {
			y, err := os.ReadFile(file)
			if err != nil {
				b.Fatal(err)
			}
			crd := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(y, &crd.Object); err != nil {
				b.Fatalf("%s: %v", file, err)
			}
			if err := c.Patch(ctx, crd, client.Apply, client.FieldOwner("bench"), client.ForceOwnership); err != nil {
				b.Fatalf("%s: %v", file, err)
			}
		}
	}
	gitRepo, ks := fluxObject("source.toolkit.fluxcd.io/v1", "GitRepository"), fluxObject("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
	controlplane.Eventually(b, 30*time.Second, func() bool {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(ks.GroupVersionKind())
		l2 := &unstructured.UnstructuredList{}
		l2.SetGroupVersionKind(gitRepo.GroupVersionKind())
		return c.List(ctx, l) == nil && c.List(ctx, l2) == nil
	})

	storage := controlplane.FreePort(b)
	if err := os.Mkdir(filepath.Join(dir, "storage"), 0o755); err != nil {
		b.Fatal(err)
	}
	src := startFlux(b, fluxDir, "source-controller", kubeconfig, dir,
		"--storage-path="+filepath.Join(dir, "storage"),
		fmt.Sprintf("--storage-addr=127.0.0.1:%d", storage), fmt.Sprintf("--storage-adv-addr=127.0.0.1:%d", storage))
	kus := startFlux(b, fluxDir, "kustomize-controller", kubeconfig, dir)
	procs := []*fluxProcess{src, kus}
	logs := func() string {
		var s strings.Builder
		for _, p := range procs {
			l, _ := os.ReadFile(p.log)
			fmt.Fprintf(&s, "%s log:\n%s\n", p.name, tail(string(l), 40))
		}
		return s.String()
	}
	time.Sleep(2 * time.Second)
	for _, p := range procs {
		s.idleRSS += rssMiB(b, p.cmd.Process.Pid)
	}

	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "flux-system"}}}
	_ = unstructured.SetNestedMap(gitRepo.Object, map[string]any{
		"url": git.RepoURL(repo), "interval": "1h", "ref": map[string]any{"branch": "main"},
	}, "spec")
	_ = unstructured.SetNestedMap(ks.Object, map[string]any{
		"interval": "1h", "path": "./", "prune": true,
		"sourceRef": map[string]any{"kind": "GitRepository", "name": "bench"},
	}, "spec")
	for _, o := range []*unstructured.Unstructured{ns, gitRepo, ks} {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	ksKey := types.NamespacedName{Namespace: "flux-system", Name: "bench"}
	appliedAt := func(sha string) func() bool {
		return func() bool {
			k := fluxObject("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
			if api.c.Get(ctx, ksKey, k) != nil {
				return false
			}
			rev, _, _ := unstructured.NestedString(k.Object, "status", "lastAppliedRevision")
			return rev == "main@sha1:"+sha && fluxReady(k)
		}
	}
	waitFor(b, time.Now(), 5*time.Minute, logs, appliedAt(head))

	n := 5
	for b.Loop() {
		b.StopTimer()
		config.Replace(b, "bench", "hyperconverged.yaml", migrations+strconv.Itoa(n), migrations+strconv.Itoa(n+1))
		n++
		all, _ := renderYAML(b, engine, config.Dir, f)
		sha := repo.Commit(b, "rendered example", map[string]string{"all.yaml": all})
		b.StartTimer()
		start := time.Now()
		annotate(b, api.c, "source.toolkit.fluxcd.io/v1", "GitRepository", ksKey, start.Format(time.RFC3339Nano))
		s.commit = append(s.commit, waitFor(b, start, 2*time.Minute, logs, appliedAt(sha)))
	}
	b.StopTimer()

	for range fluxNoops {
		time.Sleep(500 * time.Millisecond)
		m0 := api.mark(b)
		start := time.Now()
		at := start.Format(time.RFC3339Nano)
		annotate(b, api.c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", ksKey, at)
		s.noop = append(s.noop, waitFor(b, start, 2*time.Minute, logs, func() bool {
			k := fluxObject("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
			if api.c.Get(ctx, ksKey, k) != nil {
				return false
			}
			handled, _, _ := unstructured.NestedString(k.Object, "status", "lastHandledReconcileAt")
			return handled == at && fluxReady(k)
		}))
		s.noopRequests = append(s.noopRequests, since(m0, api.mark(b)))
	}

	// The anchor: kubectl applying the unchanged set as Flux's field
	// manager (nothing changes); its discovery cache warmed by one run.
	file := filepath.Join(dir, "all.yaml")
	if err := os.WriteFile(file, []byte(renderOnce(b, engine, config.Dir, f)), 0o644); err != nil {
		b.Fatal(err)
	}
	kubectlApply := func() {
		cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "kubectl-cache"),
			"apply", "--server-side", "--force-conflicts", "--field-manager", "kustomize-controller", "-f", file)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("kubectl apply: %v\n%s", err, out)
		}
	}
	kubectlApply()
	for range fluxNoops {
		time.Sleep(500 * time.Millisecond)
		m0 := api.mark(b)
		start := time.Now()
		kubectlApply()
		s.applyNoop = append(s.applyNoop, time.Since(start))
		s.applyNoopRequests = append(s.applyNoopRequests, since(m0, api.mark(b)))
	}

	// Drift: Flux sees it only when its interval runs a reconcile.
	patch := fmt.Appendf(nil, `{"spec":{"interval":%q}}`, fluxDriftInterval.String())
	k := fluxObject("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
	k.SetNamespace(ksKey.Namespace)
	k.SetName(ksKey.Name)
	if err := c.Patch(ctx, k, client.RawPatch(types.MergePatchType, patch)); err != nil {
		b.Fatal(err)
	}
	waitFor(b, time.Now(), time.Minute, logs, func() bool {
		k := fluxObject("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
		if c.Get(ctx, ksKey, k) != nil {
			return false
		}
		observed, _, _ := unstructured.NestedInt64(k.Object, "status", "observedGeneration")
		return observed == k.GetGeneration() && fluxReady(k)
	})
	for i := range fluxDrifts {
		time.Sleep(driftDelay(i))
		s.drift = append(s.drift, drift(b, c, kvLike, 3*fluxDriftInterval, logs))
	}
	time.Sleep(2 * time.Second)
	var detail []string
	for _, p := range procs {
		s.steadyRSS += rssMiB(b, p.cmd.Process.Pid)
		detail = append(detail, rssDetail(b, p.name, p.cmd.Process.Pid))
	}
	s.rssDetail = strings.Join(detail, " + ")
	reportSide(b, s)
	return s
}

// renderOnce is renderYAML's file.
func renderOnce(b *testing.B, engine *graph.Engine, dir string, f map[string]any) string {
	y, _ := renderYAML(b, engine, dir, f)
	return y
}

// fluxObject returns an empty Flux object flux-system/bench of kind.
func fluxObject(apiVersion, kind string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	o.SetNamespace("flux-system")
	o.SetName("bench")
	return o
}

// fluxReady reports whether o's Ready condition is True for its current
// generation.
func fluxReady(o *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			g, _ := m["observedGeneration"].(int64)
			return m["status"] == "True" && (g == 0 || g == o.GetGeneration())
		}
	}
	return false
}

// annotate sets reconcile.fluxcd.io/requestedAt to at on the Flux object
// key of kind.
func annotate(b *testing.B, c client.Client, apiVersion, kind string, key types.NamespacedName, at string) {
	o := fluxObject(apiVersion, kind)
	o.SetNamespace(key.Namespace)
	o.SetName(key.Name)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, at)
	if err := c.Patch(context.Background(), o, client.RawPatch(types.MergePatchType, patch)); err != nil {
		b.Fatal(err)
	}
}

// waitFor polls cond every 10 ms until it holds and returns the time since
// start, failing with logs() after timeout.
func waitFor(b *testing.B, start time.Time, timeout time.Duration, logs func() string, cond func() bool) time.Duration {
	b.Helper()
	for time.Since(start) < timeout {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("not within %s\n%s", timeout, logs())
	return 0
}

// reportSide reports a side's figures as benchmark metrics.
func reportSide(b *testing.B, s sideFigures) {
	b.ReportMetric(measure.Median(s.commit), "commit-median-ms")
	b.ReportMetric(measure.Median(s.noop), "noop-median-ms")
	b.ReportMetric(measure.MedianOf(s.noopRequests), "noop-requests")
	b.ReportMetric(measure.Median(s.drift), "drift-median-ms")
	b.ReportMetric(s.idleRSS, "idle-RSS-MiB")
	b.ReportMetric(s.steadyRSS, "steady-RSS-MiB")
	if len(s.applyNoop) > 0 {
		b.ReportMetric(measure.Median(s.applyNoop), "kubectl-noop-ms")
		b.ReportMetric(measure.MedianOf(s.applyNoopRequests), "kubectl-noop-requests")
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
