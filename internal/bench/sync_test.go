package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/bench/measure"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/graph/facts"
	"github.com/converge-dev/converge/internal/images"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/gitserver"
	"github.com/converge-dev/converge/reconciler"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// migrations is the line of testdata/example/hyperconverged.yaml each
// iteration rewrites: a change that reaches the HyperConverged and the
// KubeVirt CR and leaves every other object unchanged.
const migrations = "parallelMigrationsPerCluster: "

// BenchmarkCommitToApplied measures how long a pushed commit takes to be
// applied, and what converge-controller holds in memory doing it. Each
// sub-benchmark runs on its own fresh API server and changes
// parallelMigrationsPerCluster once per iteration. No operator runs the
// operand CRs there (no kubelet), so both apply as a Sync with spec.wait
// false does: every stage in order, Ready once applied:
//
//   - direct-apply, the floor: load, render and apply the changed config
//     in-process with the Pipeline `converge apply` uses (warm engine,
//     facts discovered once); no Git, no controller.
//   - webhook: the real converge-controller binary with a Sync of a real
//     Git server (git http-backend over HTTP, interval 1h); per iteration a
//     commit, then a signed GitHub push to its receiver, timed from the
//     POST until the Sync reports Ready at the new revision (polled every
//     10 ms). Reported: the median (median-ms) and its ratio to the
//     floor's median (x-floor), and the controller's resident memory
//     (VmRSS) idle with no Sync (idle-RSS-MiB) and at steady state after
//     the iterations (steady-RSS-MiB, of which steady-RSS-file-MiB are
//     mapped file pages: the executable's text and read-only data), with
//     the Go heap in use then (steady-heap-MiB,
//     go_memstats_heap_inuse_bytes, garbage not yet collected included),
//     and from its histograms the successful reconciles per iteration
//     (reconciles/op) and their mean duration (reconcile-ms) and fetch
//     time (fetch-ms). With CONVERGE_BENCH_PROFILES=<dir>, the
//     controller's heap profiles, idle and steady, are written there (see
//     saveHeapProfile): their inuse_space is the live heap after a GC.
func BenchmarkCommitToApplied(b *testing.B) {
	exe := buildController(b)
	var floor time.Duration
	b.Run("direct-apply", func(b *testing.B) {
		floor = reportMedian(b, directApply(b))
	})
	b.Run("webhook", func(b *testing.B) {
		m := reportMedian(b, webhookApply(b, exe))
		if floor > 0 {
			b.ReportMetric(float64(m)/float64(floor), "x-floor")
		}
	})
}

// reportMedian reports the median of the durations one iteration each
// returned by run, in milliseconds, and returns it.
func reportMedian(b *testing.B, ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	m := ds[len(ds)/2]
	b.ReportMetric(float64(m)/float64(time.Millisecond), "median-ms")
	b.Logf("%d runs: min %s, median %s, max %s", len(ds), ds[0], m, ds[len(ds)-1])
	return m
}

// benchCluster starts a fresh API server for one sub-benchmark; the
// returned client has the core, apiextensions and converge.dev types.
func benchCluster(b *testing.B) (*controlplane.Env, client.Client) {
	b.Helper()
	e, err := controlplane.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Stop() })
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			b.Fatal(err)
		}
	}
	c, err := client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	return e, c
}

// directApply returns one duration per iteration: load, render and apply
// of the example with parallelMigrationsPerCluster changed, once the first
// sync has brought every component up.
func directApply(b *testing.B) []time.Duration {
	_, c := benchCluster(b)
	ctx := context.Background()
	engine, err := graph.NewEngine()
	if err != nil {
		b.Fatal(err)
	}
	repo := exampleRepo(b)
	f, err := facts.Discover(ctx, c, c.RESTMapper())
	if err != nil {
		b.Fatal(err)
	}
	// As a Sync with spec.wait false: no health gates, no health waits.
	opts := reconciler.DefaultOptions()
	opts.HealthGates, opts.Wait = false, false
	p := reconciler.NewPipeline(c, nil, opts)
	apply := func() *reconciler.Result {
		cfg, err := engine.LoadConfig(repo.Dir)
		if err != nil {
			b.Fatal(err)
		}
		r, err := engine.Render(cfg, f)
		if err != nil {
			b.Fatal(err)
		}
		res, err := p.Sync(ctx, reconciler.Input{Rendered: r, Revision: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
	apply()
	var ds []time.Duration
	n := 5
	for b.Loop() {
		repo.Replace(b, "bench", "hyperconverged.yaml", migrations+strconv.Itoa(n), migrations+strconv.Itoa(n+1))
		n++
		start := time.Now()
		if res := apply(); res.Waiting {
			b.Fatalf("iteration %d waited on a health gate", n)
		}
		ds = append(ds, time.Since(start))
	}
	return ds
}

// webhookApply returns one duration per iteration, from the push POST to
// the Sync's Ready at the pushed revision, and reports the controller's
// idle and steady-state memory.
func webhookApply(b *testing.B, exe string) []time.Duration {
	e, c := benchCluster(b)
	repo := exampleRepo(b)
	git := gitserver.NewHTTP(b, filepath.Dir(repo.Dir), gitserver.HTTPOptions{})
	run := startConverge(b, exe, e, c, git, repo)
	// The first sync's trailing reconciles (the API server marking the
	// CRDs established, …) are not the iterations'.
	before := settledScrape(b, run.metricsURL)
	var ds []time.Duration
	n := 5
	for b.Loop() {
		ds = append(ds, run.commit(b, repo, n))
		n++
	}
	b.StopTimer()
	time.Sleep(2 * time.Second)
	b.ReportMetric(run.idleRSS, "idle-RSS-MiB")
	after := scrape(b, run.metricsURL)
	reportPhases(b, before, after, len(ds))
	b.ReportMetric(rssMiB(b, run.cmd.Process.Pid), "steady-RSS-MiB")
	b.ReportMetric(rssParts(b, run.cmd.Process.Pid).File, "steady-RSS-file-MiB")
	b.ReportMetric(gauge(after, "go_memstats_heap_inuse_bytes")/(1<<20), "steady-heap-MiB")
	run.saveHeapProfile(b, "steady")
	return ds
}

// convergeRun is a converge-controller process started by startConverge,
// with the Sync it reconciles.
type convergeRun struct {
	cmd *exec.Cmd
	c   client.Client
	key types.NamespacedName
	// hookURL is the Sync's push receiver, metricsURL the controller's
	// Prometheus endpoint, dir holds controller.log.
	hookURL, metricsURL, dir string
	// pprofURL is the controller's /debug/pprof/ endpoint.
	pprofURL string
	// idleRSS is the controller's VmRSS in MiB once ready, before the Sync.
	idleRSS float64
}

// saveHeapProfile writes the controller's heap profile to
// $CONVERGE_BENCH_PROFILES/converge-controller-<b's name>-<when>.heap
// when that variable names a directory; otherwise it does nothing. Read
// it with `go tool pprof -sample_index=inuse_space`.
func (r *convergeRun) saveHeapProfile(b *testing.B, when string) {
	dir := os.Getenv("CONVERGE_BENCH_PROFILES")
	if dir == "" {
		return
	}
	resp, err := http.Get(r.pprofURL + "heap?gc=1")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	name := strings.NewReplacer("/", "-", " ", "-").Replace(b.Name())
	f, err := os.Create(filepath.Join(dir, "converge-controller-"+name+"-"+when+".heap"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		b.Fatal(err)
	}
}

// startConverge runs the converge-controller binary exe against API server
// e (c its client), records its idle memory, creates a Sync of repo
// served by git (branch main, interval 1h, a push receiver with token
// "hook-token", spec.wait false) and returns once the Sync is Ready at the
// repository's head.
func startConverge(b *testing.B, exe string, e *controlplane.Env, c client.Client, git *gitserver.HTTP, repo *gitserver.Repo) *convergeRun {
	ctx := context.Background()
	engine, err := graph.NewEngine()
	if err != nil {
		b.Fatal(err)
	}
	crd, err := engine.SyncCRD()
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Patch(ctx, crd, client.Apply, client.FieldOwner("bench"), client.ForceOwnership); err != nil {
		b.Fatal(err)
	}
	controlplane.Eventually(b, 30*time.Second, func() bool { return c.List(ctx, &v1alpha1.SyncList{}) == nil })

	dir := b.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := e.Kubeconfig(kubeconfig); err != nil {
		b.Fatal(err)
	}
	probe, hook, metricsPort, pprofPort := controlplane.FreePort(b), controlplane.FreePort(b), controlplane.FreePort(b), controlplane.FreePort(b)
	cmd := exec.Command(exe, "--kubeconfig", kubeconfig, "--webhook=false", "--cache-dir", filepath.Join(dir, "cache"),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metricsPort),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", probe),
		"--receiver-bind-address", fmt.Sprintf("127.0.0.1:%d", hook),
		"--pprof-bind-address", fmt.Sprintf("127.0.0.1:%d", pprofPort))
	logs, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	controlplane.Eventually(b, time.Minute, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probe))
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	time.Sleep(2 * time.Second)
	run := &convergeRun{cmd: cmd, c: c, dir: dir, idleRSS: rssMiB(b, cmd.Process.Pid),
		key:        types.NamespacedName{Namespace: "converge", Name: "bench"},
		metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort),
		pprofURL:   fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", pprofPort)}
	run.saveHeapProfile(b, "idle")

	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: run.key.Namespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: run.key.Namespace, Name: "hook"}, Data: map[string][]byte{"token": []byte("hook-token")}},
		&v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: run.key.Namespace, Name: run.key.Name},
			Spec: v1alpha1.SyncSpec{
				Source:   v1alpha1.GitSource{URL: git.RepoURL(repo), Ref: &v1alpha1.GitRef{Branch: "main"}},
				Interval: metav1.Duration{Duration: time.Hour},
				Receiver: &v1alpha1.Receiver{SecretRef: v1alpha1.LocalObjectReference{Name: "hook"}},
				Wait:     new(bool),
			}},
	} {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	head := gitserver.Git(b, repo.Dir, "rev-parse", "HEAD")
	waitApplied(b, c, run.key, head, 3*time.Minute, 100*time.Millisecond, dir)
	synced := &v1alpha1.Sync{}
	if err := c.Get(ctx, run.key, synced); err != nil {
		b.Fatal(err)
	}
	if synced.Status.WebhookPath == "" {
		b.Fatalf("Sync %s has no status.webhookPath", run.key)
	}
	run.hookURL = fmt.Sprintf("http://127.0.0.1:%d%s", hook, synced.Status.WebhookPath)
	return run
}

// commit changes parallelMigrationsPerCluster from n to n+1 in repo,
// POSTs a signed GitHub push to the Sync's receiver and returns the time
// from the POST until the Sync is Ready at the new commit.
func (r *convergeRun) commit(b *testing.B, repo *gitserver.Repo, n int) time.Duration {
	sha := repo.Replace(b, "bench", "hyperconverged.yaml", migrations+strconv.Itoa(n), migrations+strconv.Itoa(n+1))
	req := gitserver.GitHubPush(b, r.hookURL, "hook-token", "main", sha)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b.Fatalf("receiver answered %s", resp.Status)
	}
	waitApplied(b, r.c, r.key, sha, time.Minute, 10*time.Millisecond, r.dir)
	return time.Since(start)
}

// waitApplied polls the Sync every poll until it is Ready with sha as its
// last applied revision, failing with the controller's log (in dir) after
// timeout.
func waitApplied(b *testing.B, c client.Client, key types.NamespacedName, sha string, timeout, poll time.Duration, dir string) {
	b.Helper()
	s := &v1alpha1.Sync{}
	for start := time.Now(); time.Since(start) < timeout; time.Sleep(poll) {
		if c.Get(context.Background(), key, s) == nil && s.Status.LastAppliedRevision == "main@sha1:"+sha &&
			s.Status.ObservedGeneration == s.Generation && apimeta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ReadyCondition) {
			return
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "controller.log"))
	b.Fatalf("Sync %s not Ready at %s after %s; last applied %q, conditions %+v\ncontroller log:\n%s",
		key, sha, timeout, s.Status.LastAppliedRevision, s.Status.Conditions, log)
}

// exampleRepo returns a Git repository holding testdata/example, one
// commit on main.
func exampleRepo(b *testing.B) *gitserver.Repo {
	repo := gitserver.NewRepo(b, b.TempDir(), "config", "main")
	repo.CopyDir(b, filepath.Join("..", "..", "testdata", "example"), ".")
	repo.Commit(b, "example", nil)
	return repo
}

// buildController builds converge-controller into a temporary directory,
// with the build tags of its image (images.BuildTags).
func buildController(b *testing.B) string {
	exe := filepath.Join(b.TempDir(), "converge-controller")
	if out, err := exec.Command("go", "build", "-tags", images.BuildTags, "-o", exe, "../../cmd/converge-controller").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// scrape reads the Prometheus text endpoint at url.
func scrape(b *testing.B, url string) map[string]*dto.MetricFamily {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return families
}

// settledScrape scrapes url every 250ms until the count of successful
// reconciles has not moved for 2s (at most 30s), and returns that scrape.
func settledScrape(b *testing.B, url string) map[string]*dto.MetricFamily {
	last := scrape(b, url)
	n, _ := histogram(last, "converge_reconcile_duration_seconds")
	for since, start := time.Now(), time.Now(); time.Since(since) < 2*time.Second && time.Since(start) < 30*time.Second; {
		time.Sleep(250 * time.Millisecond)
		last = scrape(b, url)
		if m, _ := histogram(last, "converge_reconcile_duration_seconds"); m != n {
			n, since = m, time.Now()
		}
	}
	return last
}

// gauge is the value of the single gauge name of families (0 if absent).
func gauge(families map[string]*dto.MetricFamily, name string) float64 {
	if f := families[name]; f != nil && len(f.GetMetric()) == 1 {
		return f.GetMetric()[0].GetGauge().GetValue()
	}
	return 0
}

// histogram sums the sample count and sum of every series of the
// histogram name of families whose result label is "success".
func histogram(families map[string]*dto.MetricFamily, name string) (count uint64, sum float64) {
	for _, m := range families[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "result" && l.GetValue() == "success" {
				count += m.GetHistogram().GetSampleCount()
				sum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return count, sum
}

// reportPhases reports, from the controller's histograms scraped before
// and after n iterations, the successful reconciles per iteration and the
// mean duration of those reconciles and of their fetches.
func reportPhases(b *testing.B, before, after map[string]*dto.MetricFamily, n int) {
	for _, h := range []struct{ name, unit string }{
		{"converge_reconcile_duration_seconds", "reconcile-ms"},
		{"converge_fetch_duration_seconds", "fetch-ms"},
	} {
		c0, s0 := histogram(before, h.name)
		c1, s1 := histogram(after, h.name)
		if c1 == c0 {
			b.Fatalf("no successful sample of %s in %d iterations", h.name, n)
		}
		b.ReportMetric((s1-s0)/float64(c1-c0)*1000, h.unit)
		if h.unit == "reconcile-ms" {
			b.ReportMetric(float64(c1-c0)/float64(n), "reconciles/op")
		}
	}
	// The status refreshes that answer the operators' status updates
	// (no fetch, render or apply; not reconciles).
	c0, _ := histogram(before, "converge_status_refresh_duration_seconds")
	c1, _ := histogram(after, "converge_status_refresh_duration_seconds")
	b.ReportMetric(float64(c1-c0)/float64(n), "refreshes/op")
}

// rssParts reads the anonymous and file-backed resident memory of process
// pid from /proc.
func rssParts(b *testing.B, pid int) measure.RSS {
	r, err := measure.RSSPartsMiB(pid)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// rssDetail names process pid's resident memory: "name N MiB (file F)",
// F being the mapped file pages (the executable's) within N.
func rssDetail(b *testing.B, name string, pid int) string {
	return fmt.Sprintf("%s %.0f MiB (file %.0f)", name, rssMiB(b, pid), rssParts(b, pid).File)
}

// rssMiB reads the resident set size of process pid from /proc.
func rssMiB(b *testing.B, pid int) float64 {
	mib, err := measure.RSSMiB(pid)
	if err != nil {
		b.Fatal(err)
	}
	return mib
}
