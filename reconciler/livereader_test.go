package reconciler_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/reconciler"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// TestLiveReaderAfterLostDelete reproduces what a sync meets after a
// delete whose response was lost to an API server restart: the inventory
// still lists the object, and the cache, not yet relisted, still lists it
// at the resourceVersion the inventory recorded. The cache is a real
// controller-runtime cache whose informers are stopped once they hold the
// object, so it never sees the delete. Read through that cache, the sync
// skips the object and leaves it missing (the hazard, checked so the test
// proves its setup); with Input.LiveReader set to a direct client, the
// same sync creates it again.
func TestLiveReaderAfterLostDelete(t *testing.T) {
	cfg := startEnv(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := cache.New(cfg, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cctx, stopCache := context.WithCancel(context.Background())
	defer stopCache()
	go func() { _ = ca.Start(cctx) }()
	p := reconciler.NewPipeline(c, ca, testOptions(false))
	render := func() *graphRendered {
		return withObjects(renderExample(t, nil, nil), configMap("lost", map[string]string{"k": "v"}))
	}
	const name = "ConfigMap/" + hcNS + "/lost"
	id := hcNS + "_lost__ConfigMap"
	// Twice: the first sync creates the CRDs, so only the second starts
	// an informer for every kind (a stopped cache starts no new one).
	doSync(t, p, render())
	first := doSync(t, p, render())
	rv := inventory.Index(first.Inventory)[id].ResourceVersion
	if rv == "" {
		t.Fatalf("the inventory records no resourceVersion for %s", id)
	}
	ctx := context.Background()
	key := client.ObjectKey{Namespace: hcNS, Name: "lost"}
	controlplane.Eventually(t, time.Minute, func() bool {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		return ca.Get(ctx, key, m) == nil && m.ResourceVersion == rv
	})
	stopCache() // the informers stop; the cache keeps serving what it holds
	if err := c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: hcNS, Name: "lost"}}); err != nil {
		t.Fatal(err)
	}
	exists := func() bool { return c.Get(ctx, key, &corev1.ConfigMap{}) == nil }

	stale := doSync(t, p, render())
	if got := actions(stale.ChangeSet)[name]; got != ssa.UnchangedAction || exists() {
		t.Fatalf("through the stale cache: %s action %q, exists %v; want it skipped (%q) and still missing, or the test does not reproduce a stale cache", name, got, exists(), ssa.UnchangedAction)
	}

	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := p.Sync(sctx, reconciler.Input{Rendered: render(), Revision: "test", LiveReader: c})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res.ChangeSet)[name]; got != ssa.CreatedAction || !exists() {
		t.Errorf("with LiveReader: %s action %q, exists %v; want it created", name, got, exists())
	}
}
