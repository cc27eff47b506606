package reconciler_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/gitops"
	"github.com/converge-dev/converge/graph"
	"github.com/converge-dev/converge/reconciler"
)

// TestDriftIsReverted runs GitSync in a real controller-runtime manager
// (cache-backed reads, metadata watches) and edits a field converge owns
// on the KubeVirt CR: the watch must bring it back long before the
// (one-hour) interval.
func TestDriftIsReverted(t *testing.T) {
	repo := newGitRepo(t)
	cfg := startEnv(t)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	synced := make(chan *reconciler.Result, 64)
	s := &reconciler.GitSync{
		Fetcher:  gitops.NewFetcher(gitops.Options{CacheDir: t.TempDir()}),
		Source:   gitops.Source{URL: repo.dir},
		Path:     ".",
		Interval: time.Hour,
		Engine:   e,
		Pipeline: reconciler.NewPipeline(mgr.GetClient(), mgr.GetCache(), reconciler.DefaultOptions()),
		OnResult: func(r *reconciler.Result, err error) {
			if err != nil {
				t.Errorf("sync: %v", err)
				return
			}
			synced <- r
		},
	}
	if err := s.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	select {
	case <-synced:
	case <-time.After(2 * time.Minute):
		t.Fatal("no first sync")
	}

	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "kubevirt-hyperconverged", Name: "kubevirt-kubevirt-hyperconverged"}
	kv := &unstructured.Unstructured{}
	kv.SetAPIVersion("kubevirt.io/v1")
	kv.SetKind("KubeVirt")
	if err := c.Get(ctx, key, kv); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(kv.Object, "RemoveWorkloads", "spec", "uninstallStrategy"); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, kv, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if err := c.Get(ctx, key, kv); err != nil {
			t.Fatal(err)
		}
		v, _, _ := unstructured.NestedString(kv.Object, "spec", "uninstallStrategy")
		if v == "BlockUninstallIfWorkloadsExist" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("KubeVirt spec.uninstallStrategy still %q a minute after the edit: drift not reverted", v)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
