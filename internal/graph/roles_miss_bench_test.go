package graph_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/internal/graph"
)

// BenchmarkRolesChanged measures one derivation of the KubeVirt roles for
// the KubeVirt CR the graph derives from an HC with defaults, its
// parallelMigrationsPerCluster changed at every iteration: what the virt
// operator pays per commit that changes the CR (a roles cache miss).
func BenchmarkRolesChanged(b *testing.B) {
	e, err := graph.NewEngine()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	hc := "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nmetadata:\n  name: kubevirt-hyperconverged\n  namespace: kubevirt-hyperconverged\nspec: {}\n"
	if err := os.WriteFile(filepath.Join(dir, "hc.yaml"), []byte(hc), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, err := e.LoadConfig(dir)
	if err != nil {
		b.Fatal(err)
	}
	r, err := e.RenderWith(cfg, graph.Inputs{})
	if err != nil {
		b.Fatal(err)
	}
	var kv *unstructured.Unstructured
	for _, o := range r.Objects() {
		if o.GetKind() == "KubeVirt" {
			kv = o.DeepCopy()
		}
	}
	if kv == nil {
		b.Fatal("no KubeVirt rendered")
	}
	in := graph.RoleInputs{Namespace: kv.GetNamespace(), Images: map[string]string{"node": "registry.local/converge-node:v9"}}
	n := int64(5)
	for b.Loop() {
		n++
		if err := unstructured.SetNestedField(kv.Object, n, "spec", "configuration", "migrations", "parallelMigrationsPerCluster"); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Roles("KubeVirt", kv, in); err != nil {
			b.Fatal(err)
		}
	}
}
