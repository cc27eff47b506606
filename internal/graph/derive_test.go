package graph_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/graph"
)

// TestDerive runs the derivation rules in testdata/derive/<component>/*.txtar:
// each case renders hc.yaml (with facts.yaml, if any, and the Sync fields
// of sync.yaml, if any: operators) and checks that
//
//   - every document of want.yaml has a rendered object with the same
//     apiVersion, kind and metadata.name whose fields include the document's
//     (maps by the keys given, lists and scalars exactly; null means the key
//     must be absent);
//   - no rendered object matches a document of absent.yaml;
//   - with error.txt, rendering fails with an error containing each of its
//     lines.
//
// The comment of each archive names the rule and the HCO source it follows.
func TestDerive(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "derive", "*", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no derivation cases under testdata/derive")
	}
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, filepath.Join("..", "..", "testdata", "derive")+string(filepath.Separator)), ".txtar")
		t.Run(name, func(t *testing.T) { runDeriveCase(t, e, f) })
	}
}

func runDeriveCase(t *testing.T, e *graph.Engine, path string) {
	ar, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ar.Comment, []byte("Source:")) {
		t.Errorf("%s: the comment must cite the upstream source (a line \"# Source: ...\")", path)
	}
	sections := map[string][]byte{}
	for _, f := range ar.Files {
		sections[f.Name] = f.Data
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hc.yaml"), sections["hc.yaml"], 0o644); err != nil {
		t.Fatal(err)
	}
	var facts map[string]any
	if data, ok := sections["facts.yaml"]; ok {
		fp := filepath.Join(t.TempDir(), "facts.yaml")
		if err := os.WriteFile(fp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if facts, err = e.FactsFile(fp); err != nil {
			t.Fatalf("facts.yaml: %v", err)
		}
	}
	var sync struct {
		Operators string `json:"operators"`
	}
	if data, ok := sections["sync.yaml"]; ok {
		if err := yaml.UnmarshalStrict(data, &sync); err != nil {
			t.Fatalf("sync.yaml: %v", err)
		}
	}
	cfg, err := e.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.RenderWith(cfg, graph.Inputs{Facts: facts, Operators: sync.Operators})
	if wantErr, ok := sections["error.txt"]; ok {
		if err == nil {
			t.Fatalf("render succeeded, want an error containing:\n%s", wantErr)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(wantErr)), "\n") {
			if !strings.Contains(err.Error(), line) {
				t.Errorf("render error lacks %q:\n%v", line, err)
			}
		}
		return
	}
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	objs := map[string]map[string]any{}
	for _, o := range r.Objects() {
		objs[objectKey(o.Object)] = o.Object
	}
	for _, want := range decodeDocs(t, sections["want.yaml"]) {
		key := objectKey(want)
		got, ok := objs[key]
		if !ok {
			t.Errorf("no rendered %s; rendered: %s", key, strings.Join(sortedKeys(objs), ", "))
			continue
		}
		for _, d := range subsetDiff("", want, got) {
			t.Errorf("%s: %s", key, d)
		}
	}
	for _, absent := range decodeDocs(t, sections["absent.yaml"]) {
		if _, ok := objs[objectKey(absent)]; ok {
			t.Errorf("%s is rendered, want it absent", objectKey(absent))
		}
	}
}

// objectKey identifies an object by apiVersion, kind and name.
func objectKey(o map[string]any) string {
	md, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%v %v %v", o["apiVersion"], o["kind"], md["name"])
}

func decodeDocs(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc map[string]any
		if err := d.Decode(&doc); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("decoding expected documents: %v", err)
		}
		if doc != nil {
			out = append(out, doc)
		}
	}
}

// subsetDiff lists where got differs from want: maps are compared on want's
// keys (a nil want value means the key must be absent), everything else by
// deep equality after normalising numbers.
func subsetDiff(path string, want, got any) []string {
	wm, ok := want.(map[string]any)
	if !ok {
		if !reflect.DeepEqual(normalise(want), normalise(got)) {
			return []string{fmt.Sprintf("%s: got %s, want %s", orRoot(path), show(got), show(want))}
		}
		return nil
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s: got %s, want a map", orRoot(path), show(got))}
	}
	var diffs []string
	for _, k := range sortedKeys(wm) {
		p := path + "." + k
		gv, present := gm[k]
		if wm[k] == nil {
			if present {
				diffs = append(diffs, fmt.Sprintf("%s: got %s, want it absent", p, show(gv)))
			}
			continue
		}
		if !present {
			diffs = append(diffs, fmt.Sprintf("%s: absent, want %s", p, show(wm[k])))
			continue
		}
		diffs = append(diffs, subsetDiff(p, wm[k], gv)...)
	}
	return diffs
}

// normalise round-trips v through JSON so that int64 and float64 compare.
func normalise(v any) any {
	b, _ := yaml.Marshal(v)
	var out any
	_ = yaml.Unmarshal(b, &out)
	return out
}

func show(v any) string {
	b, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(b))
}

func orRoot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
