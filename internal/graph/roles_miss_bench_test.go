package graph_test

import (
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
	kv := derivedKubeVirt(b, e)
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
