package graph_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/rolestest"
)

// TestRolesDerive runs the roles rules in testdata/roles/<kind>/*.txtar:
// each case evaluates the roles of cr.yaml (its kind's #Roles) with
// inputs.yaml ({namespace, images, inputs}; default namespace of the CR,
// else converge-system, and node image
// ghcr.io/converge-dev/converge-node:dev; an input written
// {embedded: <dir>} is graph.EmbeddedPackage(<dir>): rolestest.EmbeddedInputs)
// and checks want.yaml and absent.yaml as TestDerive does but for lists of
// maps, compared element by element as maps (rolesDiff), refusals.txt
// (each line contained in one refusal; without it there must be none)
// and error.txt (each line in the error). The comment cites the source.
func TestRolesDerive(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "roles", "*", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no roles cases under testdata/roles")
	}
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, filepath.Join("..", "..", "testdata", "roles")+string(filepath.Separator)), ".txtar")
		t.Run(name, func(t *testing.T) { runRolesCase(t, e, f) })
	}
}

func runRolesCase(t *testing.T, e *graph.Engine, path string) {
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
	cr := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(sections["cr.yaml"], &cr.Object); err != nil {
		t.Fatalf("cr.yaml: %v", err)
	}
	in := graph.RoleInputs{Namespace: cr.GetNamespace(), Images: map[string]string{"node": "ghcr.io/converge-dev/converge-node:dev"}}
	if in.Namespace == "" {
		in.Namespace = "converge-system"
	}
	if data, ok := sections["inputs.yaml"]; ok {
		if err := yaml.UnmarshalStrict(data, &in); err != nil {
			t.Fatalf("inputs.yaml: %v", err)
		}
		rolestest.EmbeddedInputs(in.Inputs)
	}
	r, err := e.Roles(cr.GetKind(), cr, in)
	if wantErr, ok := sections["error.txt"]; ok {
		if err == nil {
			t.Fatalf("roles derived, want an error containing:\n%s", wantErr)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(wantErr)), "\n") {
			if !strings.Contains(err.Error(), line) {
				t.Errorf("error lacks %q:\n%v", line, err)
			}
		}
		return
	}
	if err != nil {
		t.Fatalf("roles: %v", err)
	}
	want := strings.Split(strings.TrimSpace(string(sections["refusals.txt"])), "\n")
	if len(sections["refusals.txt"]) == 0 {
		want = nil
	}
	if len(r.Refusals) != len(want) {
		t.Errorf("refusals:\n%s\nwant %d, containing:\n%s", strings.Join(r.Refusals, "\n"), len(want), strings.Join(want, "\n"))
	}
	for _, w := range want {
		found := false
		for _, got := range r.Refusals {
			found = found || strings.Contains(got, w)
		}
		if !found {
			t.Errorf("no refusal contains %q; refusals:\n%s", w, strings.Join(r.Refusals, "\n"))
		}
	}
	objs := map[string]map[string]any{}
	for _, o := range r.Objects {
		objs[objectKey(o.Object)] = o.Object
	}
	for _, w := range decodeDocs(t, sections["want.yaml"]) {
		key := objectKey(w)
		got, ok := objs[key]
		if !ok {
			t.Errorf("no derived %s; derived: %s", key, strings.Join(sortedKeys(objs), ", "))
			continue
		}
		for _, d := range rolesDiff("", w, got) {
			t.Errorf("%s: %s", key, d)
		}
	}
	for _, a := range decodeDocs(t, sections["absent.yaml"]) {
		if _, ok := objs[objectKey(a)]; ok {
			t.Errorf("%s is derived, want it absent", objectKey(a))
		}
	}
	if os.Getenv("ROLES_DEBUG") != "" {
		for _, o := range r.Objects {
			b, _ := yaml.Marshal(o.Object)
			t.Logf("---\n%s", b)
		}
	}
}

// rolesDiff is subsetDiff, but a list of maps in want is compared with
// got's element by element (same length), each as a map: a DaemonSet's
// containers are checked on the fields a case names.
func rolesDiff(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return subsetDiff(path, want, got)
		}
		var diffs []string
		for _, k := range sortedKeys(w) {
			p := path + "." + k
			gv, present := g[k]
			switch {
			case w[k] == nil && present:
				diffs = append(diffs, fmt.Sprintf("%s: got %s, want it absent", p, show(gv)))
			case w[k] == nil:
			case !present:
				diffs = append(diffs, fmt.Sprintf("%s: absent, want %s", p, show(w[k])))
			default:
				diffs = append(diffs, rolesDiff(p, w[k], gv)...)
			}
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) || len(w) == 0 {
			return subsetDiff(path, want, got)
		}
		if _, maps := w[0].(map[string]any); !maps {
			return subsetDiff(path, want, got)
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, rolesDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return diffs
	}
	return subsetDiff(path, want, got)
}
