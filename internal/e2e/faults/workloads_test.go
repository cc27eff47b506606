package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Namespace of the workload ConfigMaps; hcNamespace and hcName are
// testdata/example's HyperConverged.
const (
	wlNamespace = "faults"
	hcNamespace = "kubevirt-hyperconverged"
	hcName      = "kubevirt-hyperconverged"
	perSet      = 3 // ConfigMaps of each alternating set
)

// workloads is the workloads file of round r: the Namespace and the
// ConfigMap "keep" (its data names the round's parity, so every round
// changes it), in every round; "even-0".."even-2" in even rounds,
// "odd-0".."odd-2" in odd ones. Each round thus creates three ConfigMaps,
// changes one and prunes three; rounds of the same parity render alike.
func workloads(r int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", wlNamespace)
	cm := func(name string) {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  parity: %q\n", name, wlNamespace, fmt.Sprint(r%2))
	}
	cm("keep")
	for _, n := range setOf(r) {
		cm(n)
	}
	return b.String()
}

// setOf gives the alternating ConfigMaps of round r.
func setOf(r int) []string {
	parity := "even"
	if r%2 == 1 {
		parity = "odd"
	}
	var out []string
	for i := range perSet {
		out = append(out, fmt.Sprintf("%s-%d", parity, i))
	}
	return out
}

// configMapsOf gives every workload ConfigMap name of round r.
func configMapsOf(r int) []string { return append([]string{"keep"}, setOf(r)...) }

// exampleFiles gives testdata/example's files by name.
func exampleFiles(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "testdata", "example")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// writeConfig writes round r's config (testdata/example and workloads.yaml)
// into dir.
func writeConfig(t *testing.T, dir string, r int) {
	t.Helper()
	files := exampleFiles(t)
	files["workloads.yaml"] = workloads(r)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
