package faults_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"syscall"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/reconciler"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// isUnavailable reports an error of a server that is down or starting.
func isUnavailable(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.As(err, &ne) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err)
}

// checkKept fails t for each object every config holds that is gone or
// was recreated (another UID) since remember: something pruned or
// deleted by mistake.
func (w *world) checkKept(t *testing.T, when string) {
	t.Helper()
	for id, k := range w.kept {
		live, err := w.get(k.gvk, k.key)
		switch {
		case err != nil:
			t.Errorf("%s: %s, which every config holds, is gone: %v", when, id, err)
		case live.GetUID() != k.uid:
			t.Errorf("%s: %s was deleted and recreated (uid %s, was %s)", when, id, live.GetUID(), k.uid)
		case live.GetDeletionTimestamp() != nil:
			t.Errorf("%s: %s is being deleted", when, id)
		}
	}
}

// checkInventory fails t unless inv lists exactly want, each once.
func checkInventory(t *testing.T, what string, inv *v1alpha1.Inventory, want []string) {
	t.Helper()
	if inv == nil {
		t.Errorf("%s: no inventory", what)
		return
	}
	seen := map[string]int{}
	for _, e := range inv.Entries {
		seen[e.ID]++
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s: %s listed %d times", what, id, n)
		}
		if !slices.Contains(want, id) {
			t.Errorf("%s: lists %s, which the config does not hold", what, id)
		}
	}
	for _, id := range want {
		if seen[id] == 0 {
			t.Errorf("%s: %s missing", what, id)
		}
	}
}

// applyInventory reads `converge apply`'s inventory ConfigMap (it must
// decode: never half-written).
func (w *world) applyInventory(t *testing.T) reconciler.StoredInventory {
	t.Helper()
	st, err := reconciler.ConfigMapStore{Client: w.c, Reader: w.c, Namespace: hcNamespace, Name: hcName}.Load(context.Background())
	if err != nil {
		t.Fatalf("inventory: %v", err)
	}
	return st
}

// checkNoDiff asks the API server for a server-side apply dry run of
// every object of r as converge applies it (fluxcd/pkg/ssa Diff, what
// `converge diff` does): each must exist and come out unchanged, so none
// is missing or half-written.
func (w *world) checkNoDiff(t *testing.T, r *graph.Rendered) {
	t.Helper()
	ctx := context.Background()
	p := reconciler.NewPipeline(w.c, nil, reconciler.DefaultOptions())
	hc := r.HyperConverged.DeepCopy()
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(hc), hc); err != nil {
		t.Errorf("the HyperConverged: %v", err)
		return
	}
	for _, o := range r.Objects() {
		desired := p.Desired(r, o, string(hc.GetUID()))
		entry, _, _, err := p.Manager.Diff(ctx, desired, ssa.DefaultDiffOptions())
		switch {
		case err != nil:
			t.Errorf("diff of %s: %v", inventory.ID(o), err)
		case entry.Action != ssa.UnchangedAction:
			t.Errorf("%s: a dry-run apply would leave it %s, want unchanged", inventory.ID(o), entry.Action)
		}
	}
}

// checkOwned fails t unless the ConfigMaps of the workload namespace that
// carry converge's owner labels are exactly names: nothing of an earlier
// config left behind.
func (w *world) checkOwned(t *testing.T, names []string) {
	t.Helper()
	list := &corev1.ConfigMapList{}
	if err := w.c.List(context.Background(), list, client.InNamespace(wlNamespace),
		client.MatchingLabels{reconciler.OwnerGroup + "/name": hcName}); err != nil {
		t.Fatalf("listing ConfigMaps: %v", err)
	}
	var got []string
	for _, cm := range list.Items {
		if cm.DeletionTimestamp == nil {
			got = append(got, cm.Name)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		t.Errorf("converge's ConfigMaps in %s: %v, want %v (left behind: %v)", wlNamespace, got, want, minus(got, want))
	}
}

func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
