package graph_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-dev/converge/internal/graph"
)

// fuzzHCHead is the HyperConverged FuzzRender puts its spec under.
const fuzzHCHead = `apiVersion: hco.kubevirt.io/v1beta1
kind: HyperConverged
metadata:
  name: kubevirt-hyperconverged
  namespace: kubevirt-hyperconverged
spec:
`

// FuzzRender renders a HyperConverged whose spec is arbitrary YAML (each
// line indented under spec:). A config that loads renders without
// panicking, to a result or an error, never both; the error is a
// *graph.Error whose every line is positioned in the config's file
// ("FILE:LINE:COL: ...") or names the HC field ("spec..." or
// "metadata..."); every object a render gives has an apiVersion, a kind
// and a name. A render takes about a second: the seeds are few
// (testdata/fuzz/FuzzRender), and a short run counts iterations: go test
// -run '^$' -fuzz FuzzRender -fuzztime 20x ./internal/graph
func FuzzRender(f *testing.F) {
	f.Add([]byte("{}"))
	f.Add([]byte("featureGates:\n  downwardMetrics: true\nliveMigrationConfig:\n  parallelMigrationsPerCluster: 5\n"))
	f.Add([]byte("liveMigrationConfig:\n  parallelMigrationsPerCluster: -1\nnoSuchField: 3\n"))
	e, err := graph.NewEngine()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, spec []byte) {
		if len(spec) > 1<<12 {
			return // the bounds are TestCheckListBounds'; a render stays cheap
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "hc.yaml")
		doc := fuzzHCHead + "  " + strings.ReplaceAll(string(spec), "\n", "\n  ") + "\n"
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := e.LoadConfig(dir)
		if err != nil {
			return // the loader's errors are FuzzLoad's
		}
		r, err := e.Render(cfg, nil)
		if (r == nil) == (err == nil) {
			t.Fatalf("render of\n%s\ngave %v and error %v", doc, r, err)
		}
		if err != nil {
			var ge *graph.Error
			if !errors.As(err, &ge) {
				t.Fatalf("render of\n%s\nerror of type %T: %v", doc, err, err)
			}
			if len(ge.Lines) == 0 {
				t.Fatalf("render of\n%s\nan error without lines", doc)
			}
			for _, l := range ge.Lines {
				if !strings.HasPrefix(l, path+":") && !strings.HasPrefix(l, "spec") && !strings.HasPrefix(l, "metadata") {
					t.Errorf("render of\n%s\nan error line neither positioned nor naming a field: %q", doc, l)
				}
			}
			return
		}
		for _, o := range r.Objects() {
			if o.GetAPIVersion() == "" || o.GetKind() == "" || o.GetName() == "" {
				t.Errorf("render of\n%s\nan object without apiVersion, kind or name: %v/%v %q", doc, o.GetAPIVersion(), o.GetKind(), o.GetName())
			}
		}
	})
}
