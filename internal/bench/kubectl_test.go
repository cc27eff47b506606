package bench

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// kubectlApply is BenchmarkApply's slow anchor: bin/kubectl (built at the
// repository's Kubernetes version) apply --server-side of the namespace
// and the 500 objects in one YAML file, a process per iteration with its
// discovery cache warmed by a first apply. "first" applies a new
// namespace's set each iteration, "noop" the unchanged set again.
// requests/op is kube-apiserver's apiserver_request_total delta over the
// iterations without lease/endpoint background and the harness's own
// requests, per iteration. Skips without bin/kubectl.
func kubectlApply(b *testing.B, noop bool) {
	bin, err := controlplane.BinDir()
	if err != nil {
		b.Fatal(err)
	}
	kubectl := filepath.Join(bin, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		b.Skipf("no kubectl in %s: run `make bin/kubectl`", bin)
	}
	e := sharedEnv(b)
	api := newAPICounter(b, e, nil)
	dir := b.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := e.Kubeconfig(kubeconfig); err != nil {
		b.Fatal(err)
	}
	write := func(ns string) string {
		nsObj, objs := objects(ns)
		var buf bytes.Buffer
		for _, o := range append([]*unstructured.Unstructured{nsObj}, objs...) {
			y, err := yaml.Marshal(o.Object)
			if err != nil {
				b.Fatal(err)
			}
			buf.WriteString("---\n")
			buf.Write(y)
		}
		file := filepath.Join(dir, ns+".yaml")
		if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
		return file
	}
	apply := func(file string) {
		cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache"),
			"apply", "--server-side", "--force-conflicts", "--field-manager", "bench", "-f", file)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("kubectl apply: %v\n%s", err, out)
		}
	}
	file := write(nextNS("kubectl"))
	apply(file)
	m0 := api.mark(b)
	b.ResetTimer()
	for b.Loop() {
		if !noop {
			b.StopTimer()
			file = write(nextNS("kubectl"))
			b.StartTimer()
		}
		apply(file)
	}
	b.StopTimer()
	b.ReportMetric(since(m0, api.mark(b))/float64(b.N), "requests/op")
}
