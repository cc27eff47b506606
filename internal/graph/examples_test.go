package graph_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// refusedKind and refusedField pick what a vet error line refuses: a
// document's kind, or a field path (indexes normalised to [*]).
var (
	refusedKind  = regexp.MustCompile(`unsupported document apiVersion "([^"]+)" kind "([^"]+)"`)
	refusedField = regexp.MustCompile(`^[^:]+:\d+:\d+: \S+ \S+: ([^:]+): `)
	listIndex    = regexp.MustCompile(`\[\d+\]`)
)

// TestKubeVirtExamples vets each of KubeVirt's own examples
// (testdata/kubevirt-examples, see SOURCE there) as `converge vet FILE`
// does and compares the count — files accepted, refused paths by the
// number of files refusing them, each file's refusals — with
// vet-summary.golden. As converge admits more of the VMI spec the golden
// changes: UPDATE_GOLDEN=1 rewrites it, and its diff is the re-count.
func TestKubeVirtExamples(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "kubevirt-examples")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s (%v)", dir, err)
	}
	e := newEngine(t)
	byPath := map[string]map[string]bool{}
	var perFile []string
	accepted := 0
	for _, f := range files {
		name := filepath.Base(f)
		cfg, err := e.LoadDocuments(f)
		if err == nil {
			err = e.Vet(cfg)
		}
		if err == nil {
			accepted++
			perFile = append(perFile, "PASS "+name)
			continue
		}
		seen := map[string]bool{}
		var paths []string
		for _, line := range strings.Split(err.Error(), "\n") {
			var what string
			if m := refusedKind.FindStringSubmatch(line); m != nil {
				what = "kind " + m[1] + " " + m[2]
			} else if m := refusedField.FindStringSubmatch(line); m != nil {
				what = listIndex.ReplaceAllString(m[1], "[*]")
			} else {
				what = line
			}
			if !seen[what] {
				seen[what] = true
				paths = append(paths, what)
			}
			if byPath[what] == nil {
				byPath[what] = map[string]bool{}
			}
			byPath[what][name] = true
		}
		perFile = append(perFile, "FAIL "+name+": "+strings.Join(paths, ", "))
	}
	var counts []string
	for p, fs := range byPath {
		counts = append(counts, fmt.Sprintf("%3d %s", len(fs), p))
	}
	sort.Slice(counts, func(i, j int) bool {
		a, b := counts[i], counts[j]
		if a[:3] != b[:3] {
			return a[:3] > b[:3]
		}
		return a < b
	})
	got := fmt.Sprintf("# converge vet of KubeVirt's examples (testdata/kubevirt-examples, SOURCE names the commit).\n"+
		"# UPDATE_GOLDEN=1 go test ./internal/graph -run TestKubeVirtExamples rewrites this file.\n"+
		"accepted: %d of %d files\n\nrefused, by the number of files:\n%s\n\nper file:\n%s\n",
		accepted, len(files), strings.Join(counts, "\n"), strings.Join(perFile, "\n"))
	golden := filepath.Join(dir, "vet-summary.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (UPDATE_GOLDEN=1 writes it)", err)
	}
	if got != string(want) {
		t.Errorf("vet of KubeVirt's examples differs from %s (UPDATE_GOLDEN=1 rewrites it):\n%s", golden, got)
	}
}
