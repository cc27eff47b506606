// Package rolestest runs derivation cases of a component's roles
// (components/graph.cue Roles, graph.Engine.Roles): golden txtar archives
// giving an operand CR and the roles' inputs, and what the native
// operator must derive from them, applied or refused. It is the roles'
// counterpart of internal/graph's TestDerive.
package rolestest

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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/graph"
)

// DefaultNamespace and DefaultNodeImage are what a case derives with
// unless its inputs.yaml says otherwise: the roles' namespace (the CR's
// own for a namespaced CR) and images.node.
const (
	DefaultNamespace = "converge-system"
	DefaultNodeImage = "ghcr.io/converge-dev/converge-node:dev"
)

// Run runs each archive dir/*.txtar as a subtest: it derives the roles of
// the kind of cr.yaml from that CR with inputs.yaml (graph.RoleInputs:
// namespace, images, inputs, an input written {embedded: <dir>} standing
// for that embedded package (EmbeddedInputs); by default the CR's
// namespace, else DefaultNamespace, and DefaultNodeImage) and checks that
//
//   - every document of want.yaml has a derived object with the same
//     apiVersion, kind and metadata.name whose fields include the
//     document's (Diff: maps by the keys given, a list of maps element by
//     element as maps, other lists and scalars exactly; null means the key
//     must be absent);
//   - no derived object matches a document of absent.yaml (by apiVersion,
//     kind, name);
//   - with objects.txt, the derived objects are exactly its lines
//     ("Kind/name", in apply order);
//   - with refusals.txt, there are as many refusals as lines and each
//     line is contained in one; without, there is none;
//   - with error.txt, the derivation fails with an error containing each
//     of its lines.
//
// The comment of each archive names the rule and its upstream source (a
// line "Source: ..."). The format is internal/graph's roles cases'
// (testdata/roles).
func Run(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no cases in %s", dir)
	}
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) { runCase(t, e, f) })
	}
}

func runCase(t *testing.T, e *graph.Engine, path string) {
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
	// Through JSON into an Unstructured, so that integers are int64 as the
	// API server's objects give them.
	js, err := yaml.YAMLToJSON(sections["cr.yaml"])
	if err != nil {
		t.Fatalf("cr.yaml: %v", err)
	}
	cr := &unstructured.Unstructured{}
	if err := cr.UnmarshalJSON(js); err != nil {
		t.Fatalf("cr.yaml: %v", err)
	}
	in := graph.RoleInputs{Namespace: cr.GetNamespace(), Images: map[string]string{"node": DefaultNodeImage}}
	if in.Namespace == "" {
		in.Namespace = DefaultNamespace
	}
	if data, ok := sections["inputs.yaml"]; ok {
		if err := yaml.UnmarshalStrict(data, &in); err != nil {
			t.Fatalf("inputs.yaml: %v", err)
		}
		EmbeddedInputs(in.Inputs)
	}
	roles, err := e.Roles(cr.GetKind(), cr, in)
	if wantErr, ok := sections["error.txt"]; ok {
		if err == nil {
			t.Fatalf("derivation succeeded, want an error containing:\n%s", wantErr)
		}
		for _, line := range lines(wantErr) {
			if !strings.Contains(err.Error(), line) {
				t.Errorf("error lacks %q:\n%v", line, err)
			}
		}
		return
	}
	if err != nil {
		t.Fatalf("derivation: %v", err)
	}
	want := lines(sections["refusals.txt"])
	if len(roles.Refusals) != len(want) {
		t.Errorf("%d refusals, want %d:\n%s", len(roles.Refusals), len(want), strings.Join(roles.Refusals, "\n"))
	}
	for _, w := range want {
		found := false
		for _, got := range roles.Refusals {
			found = found || strings.Contains(got, w)
		}
		if !found {
			t.Errorf("no refusal contains %q; refusals:\n%s", w, strings.Join(roles.Refusals, "\n"))
		}
	}
	objs := map[string]map[string]any{}
	var order []string
	for _, o := range roles.Objects {
		objs[objectKey(o.Object)] = o.Object
		order = append(order, o.GetKind()+"/"+o.GetName())
	}
	if data, ok := sections["objects.txt"]; ok {
		if got, want := strings.Join(order, "\n"), strings.Join(lines(data), "\n"); got != want {
			t.Errorf("objects:\n%s\nwant:\n%s", got, want)
		}
	}
	for _, w := range decodeDocs(t, sections["want.yaml"]) {
		key := objectKey(w)
		got, ok := objs[key]
		if !ok {
			t.Errorf("no derived %s; derived: %s", key, strings.Join(order, ", "))
			continue
		}
		for _, d := range Diff("", w, got) {
			t.Errorf("%s: %s", key, d)
		}
	}
	for _, a := range decodeDocs(t, sections["absent.yaml"]) {
		if _, ok := objs[objectKey(a)]; ok {
			t.Errorf("%s is derived, want it absent", objectKey(a))
		}
	}
	if os.Getenv("ROLES_DEBUG") != "" {
		for _, o := range roles.Objects {
			b, _ := yaml.Marshal(o.Object)
			t.Logf("---\n%s", b)
		}
	}
}

// lines gives the non-empty lines of data, trimmed.
func lines(data []byte) []string {
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
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
			t.Fatalf("decoding documents: %v", err)
		}
		if doc != nil {
			out = append(out, doc)
		}
	}
}

// Diff lists where got differs from want: maps are compared on want's
// keys (a nil want value means the key must be absent), a list of maps
// element by element (same length) as maps, so a DaemonSet's containers
// are checked on the fields a case names; everything else by deep
// equality after a YAML round trip (so int64 and float64 compare).
func Diff(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %s, want a map", orRoot(path), show(got))}
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var diffs []string
		for _, k := range keys {
			p := path + "." + k
			gv, present := g[k]
			switch {
			case w[k] == nil && present:
				diffs = append(diffs, fmt.Sprintf("%s: got %s, want it absent", p, show(gv)))
			case w[k] == nil:
			case !present:
				diffs = append(diffs, fmt.Sprintf("%s: absent, want %s", p, show(w[k])))
			default:
				diffs = append(diffs, Diff(p, w[k], gv)...)
			}
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if _, maps := first(w).(map[string]any); ok && maps && len(g) == len(w) {
			var diffs []string
			for i := range w {
				diffs = append(diffs, Diff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
			}
			return diffs
		}
	}
	if !reflect.DeepEqual(normalise(want), normalise(got)) {
		return []string{fmt.Sprintf("%s: got %s, want %s", orRoot(path), show(got), show(want))}
	}
	return nil
}

// first is l's first element, nil for an empty list.
func first(l []any) any {
	if len(l) == 0 {
		return nil
	}
	return l[0]
}

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

// EmbeddedInputs replaces, in inputs, every value written {embedded: <dir>}
// by graph.EmbeddedPackage(<dir>), the package the engine fills in
// (graph.CommonTemplatesPackage for the SSP's common templates).
func EmbeddedInputs(inputs map[string]any) {
	for k, x := range inputs {
		if m, ok := x.(map[string]any); ok && len(m) == 1 {
			if p, ok := m["embedded"].(string); ok {
				inputs[k] = graph.EmbeddedPackage(p)
			}
		}
	}
}
