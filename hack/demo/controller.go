package main

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/source"
	"github.com/converge-dev/converge/gitops/synccontroller"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/reconciler"
)

// controller is converge-controller's Sync reconciler running in this
// process, with what the demo observes of it through its hooks.
type controller struct {
	rec *synccontroller.Reconciler

	mu       sync.Mutex
	rendered *graph.Rendered
	// first holds, per revision, the first Pipeline result of it: the
	// sync that applied it.
	first map[string]*reconciler.Result
	// results holds every Pipeline result, in order.
	results []*reconciler.Result
}

// newScheme knows the client-go types and converge.dev/v1alpha1, as
// converge-controller's.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// startController wires a controller-runtime manager and a
// synccontroller.Reconciler as cmd/converge-controller does (without the
// hco-webhook, the receiver, metrics and leader election) against cfg,
// with its Git cache in cacheDir, and starts the manager. The manager
// stops when ctx ends; wait on the returned channel for it.
func startController(ctx context.Context, cfg *rest.Config, cacheDir string) (*controller, <-chan error, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return nil, nil, fmt.Errorf("controller manager: %w", err)
	}
	engine, err := graph.NewEngine()
	if err != nil {
		return nil, nil, err
	}
	gopts := source.DefaultOptions()
	gopts.CacheDir = cacheDir
	c := &controller{first: map[string]*reconciler.Result{}}
	c.rec = &synccontroller.Reconciler{
		Engine:  engine,
		Fetcher: source.NewFetcher(gopts),
		Options: synccontroller.DefaultOptions(),
		OnRender: func(_ *v1alpha1.Sync, r *graph.Rendered) {
			c.mu.Lock()
			c.rendered = r
			c.mu.Unlock()
		},
		OnSynced: func(_ *v1alpha1.Sync, res *reconciler.Result, err error) {
			if err != nil || res == nil {
				return
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			c.results = append(c.results, res)
			if c.first[res.Revision] == nil {
				c.first[res.Revision] = res
			}
		},
	}
	if err := c.rec.SetupWithManager(mgr); err != nil {
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return c, done, nil
}

// lastRendered returns the latest render, or nil before the first.
func (c *controller) lastRendered() *graph.Rendered {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rendered
}

// firstResult returns the first sync of revision rev, or nil.
func (c *controller) firstResult(rev string) *reconciler.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first[rev]
}

// resultsSince returns the results after the first n, and the new count.
func (c *controller) resultsSince(n int) ([]*reconciler.Result, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*reconciler.Result(nil), c.results[n:]...), len(c.results)
}
