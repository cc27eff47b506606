// Package bench measures converge against baselines run in the same
// process on the same local kube-apiserver: render time of the example
// graph, and first-sync / no-op-resync time and API request counts for
// converge's pipeline, fluxcd/pkg/ssa ApplyAllStaged, and one plain SSA
// PATCH per object (the floor); and commit-to-applied latency through
// converge-controller's push receiver next to applying the same change
// in-process, with the controller's memory (sync_test.go); and converge
// beside Flux's source-controller and kustomize-controller run as
// processes, with kubectl apply --server-side as an anchor (flux_test.go).
// Run with `make bench`; compare ns/op, requests/op and median-ms between
// the sub-benchmarks of one run.
package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/reconciler"
)

// counter counts the HTTP requests a client sends.
type counter struct {
	n  atomic.Int64
	rt http.RoundTripper
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

func countingClient(b *testing.B, cfg *rest.Config) (client.Client, *counter) {
	c := &counter{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.rt = rt; return c })
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return cl, c
}

// objects returns a namespace and 400 ConfigMaps + 100 Deployments in it
// (the set of ../shared/notes/controlplane.md).
func objects(ns string) (*unstructured.Unstructured, []*unstructured.Unstructured) {
	nsObj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	var objs []*unstructured.Unstructured
	for i := range 400 {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("cm-%d", i), "namespace": ns},
			"data":     map[string]any{"key": fmt.Sprintf("value-%d", i)},
		}})
	}
	for i := range 100 {
		name := fmt.Sprintf("deploy-%d", i)
		labels := map[string]any{"app": name}
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{
				"selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{
					"metadata": map[string]any{"labels": labels},
					"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "registry.local/app:1"}}},
				},
			},
		}})
	}
	return nsObj, objs
}

// rendered wraps the set as a graph for converge's pipeline: the
// namespace in one stage, the rest in the next. Deployments are not
// waited on (no controller-manager runs here).
func rendered(ns string) *graph.Rendered {
	nsObj, objs := objects(ns)
	hc := &unstructured.Unstructured{}
	hc.SetAPIVersion("hco.kubevirt.io/v1beta1")
	hc.SetKind("HyperConverged")
	hc.SetNamespace(ns)
	hc.SetName("bench")
	return &graph.Rendered{
		HyperConverged: hc,
		Stages:         []graph.Stage{{Name: "ns", Objects: []*unstructured.Unstructured{nsObj}}, {Name: "objects", Objects: objs}},
		Health:         map[string]string{"Deployment": "none"},
		OwnedByHC:      map[string]bool{},
	}
}

// shared is the API server of BenchmarkApply, started on first use and
// stopped by TestMain.
var shared struct {
	once sync.Once
	env  *controlplane.Env
	err  error
}

// sharedEnv returns the shared API server, starting it on first use.
func sharedEnv(b *testing.B) *controlplane.Env {
	shared.once.Do(func() { shared.env, shared.err = controlplane.Start() })
	if shared.err != nil {
		b.Fatal(shared.err)
	}
	return shared.env
}

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	code := m.Run()
	if shared.env != nil {
		_ = shared.env.Stop()
	}
	os.Exit(code)
}

var seq atomic.Int64

func nextNS(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// BenchmarkApply applies 500 objects (+ a namespace) per engine. "first"
// creates them in a new namespace each iteration; "noop" re-applies an
// unchanged set. requests/op counts every API request. kubectl apply
// --server-side, a process per apply, is the slow anchor (kubectlApply).
func BenchmarkApply(b *testing.B) {
	ctx := context.Background()
	converge := func(b *testing.B, noop bool) {
		c, n := countingClient(b, sharedEnv(b).Config)
		p := reconciler.NewPipeline(c, nil, reconciler.DefaultOptions())
		var r *graph.Rendered
		if noop {
			r = rendered(nextNS("converge"))
			if _, err := p.Sync(ctx, reconciler.Input{Rendered: r, Revision: "r"}); err != nil {
				b.Fatal(err)
			}
		}
		n.n.Store(0)
		b.ResetTimer()
		for b.Loop() {
			if !noop {
				r = rendered(nextNS("converge"))
			}
			if _, err := p.Sync(ctx, reconciler.Input{Rendered: r, Revision: "r"}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n.n.Load())/float64(b.N), "requests/op")
	}
	ssaStaged := func(b *testing.B, noop bool) {
		c, n := countingClient(b, sharedEnv(b).Config)
		m := ssa.NewResourceManager(c, polling.NewStatusPoller(c, c.RESTMapper(), polling.Options{}), reconciler.Owner)
		m.SetConcurrency(16)
		all := func(ns string) []*unstructured.Unstructured {
			nsObj, objs := objects(ns)
			return append([]*unstructured.Unstructured{nsObj}, objs...)
		}
		var set []*unstructured.Unstructured
		if noop {
			set = all(nextNS("ssa"))
			if _, err := m.ApplyAllStaged(ctx, set, ssa.DefaultApplyOptions()); err != nil {
				b.Fatal(err)
			}
		}
		n.n.Store(0)
		b.ResetTimer()
		for b.Loop() {
			if !noop {
				set = all(nextNS("ssa"))
			}
			if _, err := m.ApplyAllStaged(ctx, set, ssa.DefaultApplyOptions()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n.n.Load())/float64(b.N), "requests/op")
	}
	floor := func(b *testing.B) {
		c, n := countingClient(b, sharedEnv(b).Config)
		b.ResetTimer()
		for b.Loop() {
			nsObj, objs := objects(nextNS("patch"))
			if err := c.Patch(ctx, nsObj, client.Apply, client.FieldOwner("bench"), client.ForceOwnership); err != nil {
				b.Fatal(err)
			}
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(16)
			for _, o := range objs {
				g.Go(func() error {
					return c.Patch(gctx, o, client.Apply, client.FieldOwner("bench"), client.ForceOwnership)
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n.n.Load())/float64(b.N), "requests/op")
	}
	b.Run("floor-patch16/first", floor)
	b.Run("converge/first", func(b *testing.B) { converge(b, false) })
	b.Run("converge/noop", func(b *testing.B) { converge(b, true) })
	b.Run("ssa-ApplyAllStaged/first", func(b *testing.B) { ssaStaged(b, false) })
	b.Run("ssa-ApplyAllStaged/noop", func(b *testing.B) { ssaStaged(b, true) })
	b.Run("kubectl-server-side/first", func(b *testing.B) { kubectlApply(b, false) })
	b.Run("kubectl-server-side/noop", func(b *testing.B) { kubectlApply(b, true) })
}
