package faults_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/graph/facts"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// engine is the one render engine of the test process (the expectations
// and the Sync controller share it; the CLI builds its own per command).
var engine = sync.OnceValues(graph.NewEngine)

// world is a restartable control plane and what the checks remember.
type world struct {
	env        *controlplane.Restartable
	c          client.Client
	scheme     *runtime.Scheme
	kubeconfig string
	// kept are the objects every round's config holds, by inventory ID,
	// with the UID they had at the start: never deleted, never recreated.
	kept map[string]keptObject
}

type keptObject struct {
	gvk       schema.GroupVersionKind
	key       types.NamespacedName
	uid       types.UID
	namespace bool // a Namespace: checked last (see checkKept)
}

// startWorld starts a restartable control plane (stopped at t's end) and
// a client knowing client-go's types, CRDs and converge.dev/v1alpha1.
func startWorld(t *testing.T) *world {
	t.Helper()
	controlplane.RequireForTest(t)
	bin, err := controlplane.BinDir()
	if err != nil || !controlplane.Available(bin) {
		t.Skip("kube-apiserver and etcd are not in bin/: run `make controlplane`")
	}
	env, err := controlplane.StartRestartable()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	w := &world{env: env, scheme: runtime.NewScheme()}
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(w.scheme); err != nil {
			t.Fatal(err)
		}
	}
	if w.c, err = client.New(env.Config, client.Options{Scheme: w.scheme}); err != nil {
		t.Fatal(err)
	}
	w.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kubeconfig(w.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return w
}

// render renders the config in dir with the cluster's facts, as
// `converge apply` and a Sync do.
func (w *world) render(t *testing.T, dir string) *graph.Rendered {
	t.Helper()
	e, err := engine()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f, err := facts.Discover(ctx, w.c, w.c.RESTMapper())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := e.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.RenderContext(ctx, cfg, graph.Inputs{Facts: f})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ids gives the inventory IDs of r's objects.
func ids(r *graph.Rendered) []string {
	var out []string
	for _, o := range r.Objects() {
		out = append(out, inventory.ID(o))
	}
	return out
}

// renderParities writes the config of each parity (rounds of a parity
// render alike) into dir and renders it, remembers both (remember) and
// gives the renderings and their inventory IDs by parity.
func (w *world) renderParities(t *testing.T, dir string) (rendered [2]*graph.Rendered, want [2][]string) {
	t.Helper()
	for p := range rendered {
		writeConfig(t, dir, p)
		rendered[p] = w.render(t, dir)
		want[p] = ids(rendered[p])
	}
	w.remember(t, rendered[0], rendered[1])
	return rendered, want
}

// remember records the UIDs of the objects both renders hold, which
// must exist.
func (w *world) remember(t *testing.T, a, b *graph.Rendered) {
	t.Helper()
	inB := map[string]bool{}
	for _, id := range ids(b) {
		inB[id] = true
	}
	w.kept = map[string]keptObject{}
	for _, o := range a.Objects() {
		id := inventory.ID(o)
		if !inB[id] {
			continue
		}
		k := keptObject{gvk: o.GroupVersionKind(), key: client.ObjectKeyFromObject(o), namespace: o.GetKind() == "Namespace"}
		live, err := w.get(k.gvk, k.key)
		if err != nil {
			t.Fatalf("%s after the first apply: %v", id, err)
		}
		k.uid = live.GetUID()
		w.kept[id] = k
	}
}

// get reads an object, retrying for 30 s while its kind is not served
// (discovery catching up after a restart) or the server does not answer.
func (w *world) get(gvk schema.GroupVersionKind, key types.NamespacedName) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := w.c.Get(context.Background(), key, u)
		if err == nil || time.Now().After(deadline) || !(apimeta.IsNoMatchError(err) || isUnavailable(err)) {
			return u, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
