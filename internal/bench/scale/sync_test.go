package scale

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/bench/curve"
	"github.com/converge-dev/converge/internal/bench/measure"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/gitserver"
	"github.com/converge-dev/converge/internal/testing/vmtest"
)

// defaultSyncSizes is the Sync sweep (CONVERGE_SCALE_SYNCS overrides it):
// as many target API servers as Syncs, one HyperConverged per cluster.
const defaultSyncSizes = "2/2,5/5,10/10"

// syncFigures are one size's results.
type syncFigures struct {
	size                         Size
	firstS, firstPerS            float64
	noopS, noopPerS              float64
	targetReqs, mgmtReqs         float64 // per Sync per no-op reconcile
	steadyRSS, peakRSS, ctrlCPUS float64
}

// BenchmarkSyncScale runs converge-controller as a process with Syncs of
// testdata/example (one Git repository on a git http-backend server, spec.wait
// false, interval 1h), each driving its own remote target cluster — a
// kube-apiserver+etcd on loopback through a kubeconfig Secret — for each size
// of the sweep (CONVERGE_SCALE_SYNCS, "SYNCS/TARGETS,…" with SYNCS =
// TARGETS, default defaultSyncSizes), each size with fresh API servers
// and a fresh controller. Reported: first-s (the Syncs created → all Ready
// at the head revision) and syncs/s; then a no-op reconcile of every Sync
// at once (converge.dev/reconcile-requested-at set on each, timed until each
// reports it handled in status.lastHandledReconcileAt): noop-s, noop-syncs/s,
// API requests per Sync and no-op on its target (target-req/sync: up to
// one of them is the harness's own /metrics scrape before the no-op, which
// kube-apiserver may count in the next scrape's total) and on the
// controller's own API server (mgmt-req/sync, the harness's own requests and
// the background of measure.Requests left out); the controller's RSS after
// the no-op (steady-RSS-MiB), its peak (peak-RSS-MiB) and CPU seconds of the
// whole size (ctrl-CPU-s). Curves: sync-throughput.png, sync-controller.png
// and sync-requests.png in CONVERGE_BENCH_OUT (default bin/bench).
func BenchmarkSyncScale(b *testing.B) {
	controlplane.RequireForTest(b)
	spec := os.Getenv("CONVERGE_SCALE_SYNCS")
	if spec == "" {
		spec = defaultSyncSizes
	}
	sizes, err := ParseSizes("CONVERGE_SCALE_SYNCS", spec)
	if err != nil {
		b.Fatal(err)
	}
	for _, sz := range sizes {
		if sz.Objects != sz.Hosts {
			b.Fatalf("CONVERGE_SCALE_SYNCS %s: want as many Syncs as targets (one HyperConverged per cluster: Syncs sharing a cluster would fight over its CRDs and cluster-scoped objects)", sz)
		}
	}
	buildController(b)
	var results []syncFigures
	for _, sz := range sizes {
		b.Run(fmt.Sprintf("syncs=%d/targets=%d", sz.Objects, sz.Hosts), func(b *testing.B) {
			for range b.N { // -benchtime 1x: each size once
				results = append(results, syncScale(b, sz))
			}
		})
	}
	if len(results) == len(sizes) && !b.Failed() {
		writeSyncPlots(b, results)
	}
}

// syncScale runs one size and reports its figures.
func syncScale(b *testing.B, sz Size) syncFigures {
	b.StopTimer()
	mgmt, err := controlplane.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = mgmt.Stop() })
	targets := make([]*controlplane.Env, sz.Hosts)
	for i := range targets {
		if targets[i], err = controlplane.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = targets[i].Stop() })
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			b.Fatal(err)
		}
	}
	own := newRequestCounter(b, mgmt)
	c, err := client.New(own.cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "syncs"}}); err != nil {
		b.Fatal(err)
	}
	repo := gitserver.NewRepo(b, b.TempDir(), "config", "main")
	repo.CopyDir(b, filepath.Join(vmtest.RepoRoot(b), "testdata", "example"), ".")
	head := repo.Commit(b, "example", nil)
	git := gitserver.NewHTTP(b, filepath.Dir(repo.Dir), gitserver.HTTPOptions{})
	ctrl := startController(b, mgmt)
	cpu0 := ctrl.cpu(b)

	keys := make([]types.NamespacedName, sz.Objects)
	var objs []client.Object
	for i, t := range targets {
		kc := filepath.Join(b.TempDir(), "kubeconfig")
		if err := t.Kubeconfig(kc); err != nil {
			b.Fatal(err)
		}
		data, err := os.ReadFile(kc)
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = types.NamespacedName{Namespace: "syncs", Name: fmt.Sprintf("sync-%d", i)}
		secret := "target-" + keys[i].Name
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "syncs", Name: secret}, Data: map[string][]byte{"value": data}})
		objs = append(objs, &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: keys[i].Namespace, Name: keys[i].Name},
			Spec: v1alpha1.SyncSpec{
				Source:   v1alpha1.GitSource{URL: git.RepoURL(repo), Ref: &v1alpha1.GitRef{Branch: "main"}},
				Interval: metav1.Duration{Duration: time.Hour},
				Target:   &v1alpha1.Target{KubeConfig: v1alpha1.KubeConfigReference{SecretRef: v1alpha1.LocalObjectReference{Name: secret}}},
				Wait:     new(bool),
			}})
	}
	b.StartTimer()
	start := time.Now()
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	waitSyncs(b, c, keys, ctrl, func(s *v1alpha1.Sync) bool {
		return s.Status.LastAppliedRevision == "main@sha1:"+head && s.Status.ObservedGeneration == s.Generation &&
			apimeta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ReadyCondition)
	})
	f := syncFigures{size: sz, firstS: time.Since(start).Seconds()}
	b.StopTimer()
	f.firstPerS = float64(sz.Objects) / f.firstS

	// Let the first syncs' trailing events settle, then a no-op of each.
	time.Sleep(5 * time.Second)
	t0 := make([]float64, len(targets))
	for i, t := range targets {
		t0[i] = serverRequests(b, t.Config)
	}
	m0 := own.mark(b)
	at := time.Now().UTC().Format(time.RFC3339Nano)
	start = time.Now()
	for _, k := range keys {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ReconcileRequestAnnotation, at)
		if err := c.Patch(ctx, &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			b.Fatal(err)
		}
	}
	waitSyncs(b, c, keys, ctrl, func(s *v1alpha1.Sync) bool {
		return s.Status.LastHandledReconcileAt == at && apimeta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ReadyCondition)
	})
	f.noopS = time.Since(start).Seconds()
	f.noopPerS = float64(sz.Objects) / f.noopS
	time.Sleep(2 * time.Second) // the status writes' own events
	var treqs float64
	for i, t := range targets {
		treqs += serverRequests(b, t.Config) - t0[i]
	}
	f.targetReqs = treqs / float64(sz.Objects)
	f.mgmtReqs = own.since(b, m0) / float64(sz.Objects)
	f.steadyRSS = rssNow(b, ctrl)
	f.peakRSS = ctrl.peakRSS(b)
	f.ctrlCPUS = ctrl.cpu(b) - cpu0
	for _, m := range []struct {
		v    float64
		unit string
	}{{f.firstS, "first-s"}, {f.firstPerS, "syncs/s"}, {f.noopS, "noop-s"}, {f.noopPerS, "noop-syncs/s"},
		{f.targetReqs, "target-req/sync"}, {f.mgmtReqs, "mgmt-req/sync"},
		{f.steadyRSS, "steady-RSS-MiB"}, {f.peakRSS, "peak-RSS-MiB"}, {f.ctrlCPUS, "ctrl-CPU-s"}} {
		b.ReportMetric(m.v, m.unit)
	}
	b.Logf("%d Syncs on %d targets: first sync of all %.1f s (%.2f Syncs/s); no-op of all %.2f s (%.1f Syncs/s), %.1f requests per Sync on its target, %.1f on the controller's cluster; converge-controller RSS %.0f MiB (peak %.0f), %.1f CPU-s",
		sz.Objects, sz.Hosts, f.firstS, f.firstPerS, f.noopS, f.noopPerS, f.targetReqs, f.mgmtReqs, f.steadyRSS, f.peakRSS, f.ctrlCPUS)
	return f
}

// waitSyncs polls every Sync of keys until done holds for all of them,
// failing after 5 minutes with the ones left and the controller's log.
func waitSyncs(b *testing.B, c client.Client, keys []types.NamespacedName, ctrl *controller, done func(*v1alpha1.Sync) bool) {
	b.Helper()
	left := keys
	for start := time.Now(); len(left) > 0; time.Sleep(50 * time.Millisecond) {
		var still []types.NamespacedName
		var last *v1alpha1.Sync
		for _, k := range left {
			s := &v1alpha1.Sync{}
			if err := c.Get(context.Background(), k, s); err != nil || !done(s) {
				still, last = append(still, k), s
			}
		}
		left = still
		ctrl.check(b)
		if len(left) > 0 && time.Since(start) > 5*time.Minute {
			b.Fatalf("%d of %d Syncs not done after 5 min (%s: conditions %+v)\ncontroller log:\n%s",
				len(left), len(keys), left[0], last.Status.Conditions, ctrl.tail(40))
		}
	}
}

// requestCounter counts the requests the harness sends to one API
// server, to leave them out of that server's total.
type requestCounter struct {
	cfg  *rest.Config
	n    *countingTransport
	host string
}

// countingTransport counts requests.
type countingTransport struct {
	rt http.RoundTripper
	n  atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

func newRequestCounter(b *testing.B, env *controlplane.Env) *requestCounter {
	t := &countingTransport{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { t.rt = rt; return t })
	return &requestCounter{cfg: cfg, n: t, host: env.Config.Host}
}

// mark is the server's request total less the harness's own, now.
func (r *requestCounter) mark(b *testing.B) float64 {
	own := r.n.n.Load()
	return serverRequests(b, r.cfg) - float64(own+1) // +1: this scrape
}

// since gives the requests others sent since mark m.
func (r *requestCounter) since(b *testing.B, m float64) float64 { return r.mark(b) - m }

// serverRequests reads measure.Requests from the /metrics of the API
// server of cfg.
func serverRequests(b *testing.B, cfg *rest.Config) float64 {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := measure.Requests(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// rssNow gives the controller's resident memory now, in MiB.
func rssNow(b *testing.B, c *controller) float64 {
	m, err := measure.RSSMiB(c.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// writeSyncPlots draws the Sync sweep's curves.
func writeSyncPlots(b *testing.B, rs []syncFigures) {
	pts := func(v func(syncFigures) float64) []curve.Point {
		var ps []curve.Point
		for _, r := range rs {
			ps = append(ps, curve.Point{Size: float64(r.size.Objects), Value: v(r)})
		}
		return ps
	}
	const x = "Syncs (each its own target API server)"
	writePlots(b, map[string]curve.Plot{
		"sync-throughput.png": {Title: "Sync reconcile throughput", X: x, Y: "Syncs per second", Series: []curve.Series{
			{Name: "first sync (created → Ready)", Points: pts(func(f syncFigures) float64 { return f.firstPerS })},
			{Name: "no-op reconcile", Points: pts(func(f syncFigures) float64 { return f.noopPerS })}}},
		"sync-controller.png": {Title: "converge-controller memory", X: x, Y: "MiB", Series: []curve.Series{
			{Name: "RSS after the no-op", Points: pts(func(f syncFigures) float64 { return f.steadyRSS })},
			{Name: "peak RSS", Points: pts(func(f syncFigures) float64 { return f.peakRSS })}}},
		"sync-requests.png": {Title: "API requests per Sync per no-op reconcile", X: x, Y: "requests", Series: []curve.Series{
			{Name: "on its target", Points: pts(func(f syncFigures) float64 { return f.targetReqs })},
			{Name: "on the controller's cluster", Points: pts(func(f syncFigures) float64 { return f.mgmtReqs })}}},
	})
}
