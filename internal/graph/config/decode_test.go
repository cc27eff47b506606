package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
)

// TestLoadErrorsHaveAPlace loads one file, x.yaml, with LoadDocuments:
// every refusal names the file and, where the problem has one, its line
// (and column and field path when YAML's decoder gives them), and what
// was expected.
func TestLoadErrorsHaveAPlace(t *testing.T) {
	ctx := cuecontext.New()
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
	for _, tc := range []struct {
		name, text string
		// want is the error with the directory cut, "" to load; a loaded
		// file's ConfigMaps are checked against data (data.n, when the
		// document has it).
		want string
		n    []int64
	}{
		// Files without a document.
		{name: "empty", text: "",
			want: "x.yaml: holds no YAML document (it is empty or holds only comments); a config file holds one or more manifests"},
		{name: "comments only", text: "# a config\n\n# more\n",
			want: "x.yaml: holds no YAML document (it is empty or holds only comments); a config file holds one or more manifests"},
		{name: "separators only", text: "---\n---\n",
			want: "x.yaml: holds no YAML document (it is empty or holds only comments); a config file holds one or more manifests"},
		{name: "leading and trailing separators", text: "---\n" + cm + "---\n", n: []int64{0}},

		// Keys given twice.
		{name: "duplicate key, different values", text: cm + "data:\n  n: \"1\"\n  n: \"2\"\n",
			want: `x.yaml:7:3: data.n: key "n" given twice in one mapping (first at x.yaml:6:3); YAML keys are unique`},
		{name: "duplicate key, same value", text: cm + "metadata: {name: a}\n",
			want: `x.yaml:5:1: metadata: key "metadata" given twice in one mapping (first at x.yaml:3:1); YAML keys are unique`},
		{name: "duplicate key in a list, second document", text: cm + "---\n" + cm + "binaryData:\n  l:\n  - {a: 1, a: 1}\n",
			want: `x.yaml:12:12: binaryData.l.0.a: key "a" given twice in one mapping (first at x.yaml:12:6); YAML keys are unique`},
		{name: "the same key in two mappings", text: cm + "data:\n  name: a\n", n: []int64{0}},

		// Numbers Kubernetes cannot hold.
		{name: "below int64", text: cm + "data:\n  n: -9223372036854775809\n",
			want: `x.yaml:6:6: data.n: integer -9223372036854775809 is out of range: Kubernetes integers are 64-bit, from -9223372036854775808 to 9223372036854775807 (a quantity such as memory is a string: "64Gi")`},
		{name: "above int64", text: cm + "data:\n  n: 9223372036854775808\n",
			want: `x.yaml:6:6: data.n: integer 9223372036854775808 is out of range`},
		{name: "above uint64", text: cm + "data:\n  n: 99999999999999999999999\n",
			want: `x.yaml:6:6: data.n: integer 99999999999999999999999 is out of range`},
		{name: "hexadecimal above int64", text: cm + "data:\n  n: 0x8000000000000000\n",
			want: `x.yaml:6:6: data.n: integer 0x8000000000000000 is out of range`},
		{name: "int64 bounds", text: cm + "data:\n  n: -9223372036854775808\n---\n" + cm + "data:\n  n: 9223372036854775807\n",
			n: []int64{-9223372036854775808, 9223372036854775807}},
		{name: "an integer tagged float", text: cm + "data:\n  n: !!float 3\n", n: []int64{3}},
		{name: "infinity", text: cm + "data:\n  n: -.inf\n",
			want: `x.yaml:6:6: data.n: -infinity (YAML's .inf or .nan) is not a number Kubernetes can hold: JSON has no infinity and no NaN`},
		{name: "NaN", text: cm + "data:\n  n: .nan\n",
			want: `x.yaml:6:6: data.n: NaN (YAML's .inf or .nan) is not a number Kubernetes can hold: JSON has no infinity and no NaN`},

		// Syntax and encoding errors.
		{name: "scanner error on line 1", text: "a: b: c\n",
			want: `x.yaml:1: mapping values are not allowed in this context`},
		{name: "scanner error", text: cm + "data:\n  a: b: c\n",
			want: `x.yaml:6: mapping values are not allowed in this context`},
		{name: "parser error", text: cm + "]\n",
			want: `x.yaml:5: did not find expected key`},
		{name: "parser error on line 1", text: "]\n",
			want: `x.yaml:1: did not find expected node content`},
		{name: "unclosed flow list", text: cm + "data:\n  a: [1, 2\n  b: 3\n",
			want: `x.yaml:6: did not find expected ',' or ']'`},
		{name: "unclosed list at the end", text: cm + "data:\n  a: [\n",
			want: `x.yaml:6: did not find expected node content`},
		{name: "unknown anchor", text: cm + "data:\n  a: *nope\n",
			want: `x.yaml:6:6: unknown anchor 'nope' referenced`},
		{name: "control character", text: cm + "data:\n  a: \"\x01\"\n",
			want: `x.yaml:6:7: control character U+0001 is not allowed in YAML`},
		{name: "not UTF-8", text: cm + "data:\n  a: \xff\n",
			want: `x.yaml:6:6: byte 0xff is not UTF-8: a config file is UTF-8 text`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadDocuments(ctx, dir)
			if tc.want != "" {
				if err == nil {
					t.Fatalf("loaded; want %s", tc.want)
				}
				if got := strings.ReplaceAll(err.Error(), dir+"/", ""); !strings.HasPrefix(got, tc.want) || strings.Contains(got, "\n") {
					t.Errorf("error:\n%s\nwant one line starting:\n%s", got, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Workloads) != len(tc.n) {
				t.Fatalf("%d documents, want %d", len(cfg.Workloads), len(tc.n))
			}
			for i, d := range cfg.Workloads {
				n := d.Value.LookupPath(cue.ParsePath("data.n"))
				if !n.Exists() {
					continue
				}
				// Int, not Int64: CUE's Int64 refuses math.MinInt64.
				got, err := n.Int(nil)
				if err != nil || !got.IsInt64() || got.Int64() != tc.n[i] {
					t.Errorf("document %d: data.n = %v (%v), want %d", i, got, err, tc.n[i])
				}
			}
		})
	}
}

// TestLoadBounds refuses a mapping, a list and a file above
// MaxCollectionItems before CUE builds them (in quadratic time), and
// loads them at the bound; and a file that may hold more than MaxNodes
// before it is decoded.
func TestLoadBounds(t *testing.T) {
	ctx := cuecontext.New()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
	keys := func(n int) string {
		var b strings.Builder
		b.WriteString(cm + "data:\n")
		for i := range n {
			fmt.Fprintf(&b, "  k%d: v\n", i)
		}
		return b.String()
	}
	items := func(n int) string {
		return cm + "binaryData:\n  l: [" + strings.Repeat("1, ", n-1) + "1]\n"
	}
	docs := func(n int) string {
		return strings.Repeat("---\n"+cm, n)
	}
	for _, tc := range []struct {
		name, text, want string
	}{
		{"keys at the bound", keys(MaxCollectionItems), ""},
		{"keys above", keys(MaxCollectionItems + 1), "x.yaml:6:3: data: a mapping of 4097 keys; a config's mappings hold at most 4096 (MaxCollectionItems)"},
		{"items at the bound", items(MaxCollectionItems), ""},
		{"items above", items(MaxCollectionItems + 1), "x.yaml:6:6: binaryData.l: a list of 4097 items; a config's lists hold at most 4096 (MaxCollectionItems)"},
		{"documents at the bound", docs(MaxCollectionItems), ""},
		{"documents above", docs(MaxCollectionItems + 1), "x.yaml: 4097 documents; a config file holds at most 4096 (MaxCollectionItems)"},
		{"nodes above", cm + "data:\n  l: [" + strings.Repeat("1,", MaxNodes) + "1]\n",
			"x.yaml: may hold more YAML nodes than the config's 524288 (MaxNodes; counting the line feeds and , : - ? [ { of its text); a config is a handful of manifests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadDocuments(ctx, dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if got := strings.ReplaceAll(fmt.Sprint(err), dir+"/", ""); got != tc.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestDecodeFileCountsNodes: decodeFile refuses a file of more nodes than
// are left to the config, before decoding when nodeBound says so, and
// after when aliases expand beyond it; it gives the nodes it counted.
func TestDecodeFileCountsNodes(t *testing.T) {
	ctx := cuecontext.New()
	const aliases = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  a: &x [1,2,3,4,5,6,7,8]\n  b: *x\n  c: *x\n  d: *x\n"
	for _, tc := range []struct {
		name  string
		left  int
		want  string
		nodes int
	}{
		// The root, apiVersion, kind, metadata, its name, data, 4 lists
		// of 9: 42 nodes; nodeBound counts 27 (aliases are not expanded). An
		// alias's nodes have the anchor's positions.
		{"enough left", 42, "", 42},
		{"aliases expand beyond what is left", 41,
			"x.yaml:5:24: data.d.7: the config holds more than 524288 YAML nodes (MaxNodes) by here; a config is a handful of manifests", 42},
		{"nodeBound beyond what is left", 26,
			"x.yaml: may hold more YAML nodes than the config's 524288 (MaxNodes; counting the line feeds and , : - ? [ { of its text); a config is a handful of manifests", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, lines, nodes := decodeFile(ctx, file{path: "x.yaml", data: []byte(aliases)}, tc.left)
			if got := strings.Join(lines, "\n"); got != tc.want || nodes != tc.nodes {
				t.Errorf("got %q, %d nodes; want %q, %d nodes", got, nodes, tc.want, tc.nodes)
			}
		})
	}
}
