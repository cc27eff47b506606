package graph

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/graph/config"
)

// TestDeriveFast checks that deriveFast (the graph in two halves, v1 as
// plain data) gives what deriveGraph (#Graph as a whole) gives, for every
// case of testdata/derive and the example: the same derivation when it
// succeeds, and a failure when deriveGraph fails (derive then returns
// deriveGraph's error, with the config's positions). A config deriveFast
// refuses and deriveGraph accepts would be rendered correctly but slowly,
// and means the halves no longer check what the whole checks: it fails
// too.
func TestDeriveFast(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("..", "..", "testdata")
	files, err := filepath.Glob(filepath.Join(root, "derive", "*", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no derivation cases: %v", err)
	}
	if testing.Short() {
		files = files[:5]
	}
	t.Run("example", func(t *testing.T) {
		compareDerivations(t, e, filepath.Join(root, "example"), nil, "")
	})
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), ".txtar")
		t.Run(name, func(t *testing.T) {
			ar, err := txtar.ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			var facts map[string]any
			var sync struct {
				Operators string `json:"operators"`
			}
			for _, s := range ar.Files {
				switch s.Name {
				case "hc.yaml":
					if err := os.WriteFile(filepath.Join(dir, s.Name), s.Data, 0o644); err != nil {
						t.Fatal(err)
					}
				case "facts.yaml":
					if err := yaml.Unmarshal(s.Data, &facts); err != nil {
						t.Fatal(err)
					}
				case "sync.yaml":
					if err := yaml.Unmarshal(s.Data, &sync); err != nil {
						t.Fatal(err)
					}
				}
			}
			compareDerivations(t, e, dir, facts, sync.Operators)
		})
	}
}

// compareDerivations loads the config at dir and derives it both ways.
func compareDerivations(t *testing.T, e *Engine, dir string, facts map[string]any, operators string) {
	t.Helper()
	cfg, err := e.LoadConfig(dir)
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			return // a loader case
		}
		t.Fatal(err)
	}
	defer e.Lock()()
	hc, err := withMode(cfg.HyperConverged, operators)
	if err != nil || checkListBounds(hc) != nil {
		return // refused before any derivation
	}
	fast, ferr := e.deriveFast(hc, cfg.HostPathProvisioner, facts)
	whole, werr := e.deriveGraph(hc, cfg.HostPathProvisioner, facts)
	switch {
	case werr != nil && ferr == nil:
		t.Fatalf("deriveGraph fails, deriveFast succeeds: %v", werr)
	case werr == nil && ferr != nil:
		t.Fatalf("deriveFast fails, deriveGraph succeeds: %v", ferr)
	case werr != nil:
		return
	}
	// The nodes come in the order each evaluation gives the fields; a
	// render orders them.
	if err := fast.order(); err != nil {
		t.Fatal(err)
	}
	if err := whole.order(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fast, whole) {
		for i := range whole.Nodes {
			if i < len(fast.Nodes) && !reflect.DeepEqual(fast.Nodes[i], whole.Nodes[i]) {
				t.Errorf("node %s differs:\nfast:  %v\nwhole: %v", whole.Nodes[i].Name, fast.Nodes[i], whole.Nodes[i])
			}
		}
		t.Fatalf("deriveFast and deriveGraph differ:\nfast:  %+v\nwhole: %+v", fast, whole)
	}
}
