package reconciler_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/reconciler"
	"github.com/converge-dev/converge/reconciler/inventory"
)

const hcNS = "kubevirt-hyperconverged"

var engine = sync1(func() (*graph.Engine, error) { return graph.NewEngine() })

// sync1 memoises one engine for the package's tests (building it costs
// seconds).
func sync1(f func() (*graph.Engine, error)) func(t *testing.T) *graph.Engine {
	var e *graph.Engine
	var err error
	done := false
	return func(t *testing.T) *graph.Engine {
		t.Helper()
		if !done {
			e, err = f()
			done = true
		}
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
}

// renderExample renders a copy of testdata/example after edit (each key a
// file name, each value old→new replacements applied once; a value of
// nil removes the file), with facts (nil: plain Kubernetes).
func renderExample(t *testing.T, edit map[string][]string, facts map[string]any) *graph.Rendered {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"hyperconverged.yaml", "hostpathprovisioner.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "example", f))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if reps, ok := edit[f]; ok {
			if reps == nil {
				continue
			}
			for i := 0; i+1 < len(reps); i += 2 {
				n := strings.Replace(s, reps[i], reps[i+1], 1)
				if n == s {
					t.Fatalf("%s: %q not found", f, reps[i])
				}
				s = n
			}
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := engine(t)
	cfg, err := e.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.Render(cfg, facts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// withObjects returns r with objs added to the hco component (applied
// with the namespace and the HC), a small variant of the real graph.
func withObjects(r *graph.Rendered, objs ...*unstructured.Unstructured) *graph.Rendered {
	for i := range r.Nodes {
		if r.Nodes[i].Name == "hco" {
			r.Nodes[i].Objects = append(r.Nodes[i].Objects, objs...)
		}
	}
	for i := range r.Stages {
		if len(r.Stages[i].Nodes) == 1 && r.Stages[i].Nodes[0] == "hco" {
			r.Stages[i].Objects = append(r.Stages[i].Objects, objs...)
		}
	}
	return r
}

func configMap(name string, data map[string]string) *unstructured.Unstructured {
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hcNS}, Data: data}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
	if err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u
}

func testOptions(gates bool) reconciler.Options {
	o := reconciler.DefaultOptions()
	o.HealthGates = gates
	o.WaitTimeout = time.Minute // a bound for loaded CI machines, not a speed check
	o.WaitInterval = 100 * time.Millisecond
	return o
}

// doSync runs one Pipeline.Sync with a fresh direct client (no cache) and
// fails the test on an error.
func doSync(t *testing.T, p *reconciler.Pipeline, r *graph.Rendered) *reconciler.Result {
	t.Helper()
	res, err := trySync(t, p, r)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return res
}

func trySync(t *testing.T, p *reconciler.Pipeline, r *graph.Rendered) (*reconciler.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return p.Sync(ctx, reconciler.Input{Rendered: r, Revision: "test"})
}

// obj reads apiVersion/kind namespace/name; nil when not found.
func obj(t *testing.T, c client.Client, apiVersion, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// setConditions writes status.conditions on the operand CR with the status
// subresource, as its operator would (no operator runs in tests).
func setConditions(t *testing.T, c client.Client, apiVersion, kind, ns, name string, available, degraded metav1.ConditionStatus, msg string) {
	t.Helper()
	u := obj(t, c, apiVersion, kind, ns, name)
	if u == nil {
		t.Fatalf("%s %s/%s not found", kind, ns, name)
	}
	now := metav1.Now().Rfc3339Copy().UTC().Format(time.RFC3339)
	cond := func(typ string, s metav1.ConditionStatus) any {
		return map[string]any{"type": typ, "status": string(s), "reason": "Test", "message": msg, "lastTransitionTime": now}
	}
	if err := unstructured.SetNestedSlice(u.Object, []any{
		cond("Available", available), cond("Progressing", metav1.ConditionFalse), cond("Degraded", degraded),
	}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	// as an operator reports: of the generation it reconciled
	if err := unstructured.SetNestedField(u.Object, u.GetGeneration(), "status", "observedGeneration"); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(context.Background(), u, client.FieldOwner("test-operator")); err != nil {
		t.Fatalf("writing %s status: %v", kind, err)
	}
}

func health(res *reconciler.Result) map[string]reconciler.ComponentHealth {
	m := map[string]reconciler.ComponentHealth{}
	for _, c := range res.Components {
		m[c.Name] = c
	}
	return m
}

func inInventory(res *reconciler.Result, id string) bool {
	_, ok := inventory.Index(res.Inventory)[id]
	return ok
}

func idOf(u *unstructured.Unstructured) string { return inventory.ID(u) }

func newClient(t *testing.T) (client.Client, *reconciler.Pipeline, func(opts reconciler.Options) *reconciler.Pipeline) {
	t.Helper()
	cfg := startEnv(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(opts reconciler.Options) *reconciler.Pipeline { return reconciler.NewPipeline(c, nil, opts) }
	return c, mk(testOptions(true)), mk
}

type graphRendered = graph.Rendered

func nestedInt(m map[string]any, path ...string) (int64, bool, error) {
	return unstructured.NestedInt64(m, path...)
}
