package config

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/encoding/yaml"
)

// FuzzLoad loads one file of arbitrary bytes as a config directory with
// LoadDocuments. It must not panic or hang, it gives a config or an error
// and never both, every line of the error names the file, and every
// document it loads is placed in the file; and nodeBound is not below
// the nodes checkSyntax counts (when no alias expands). The seeds are
// testdata/fuzz/FuzzLoad; a short run: go test -run '^$' -fuzz FuzzLoad
// -fuzztime 60s ./internal/graph/config
func FuzzLoad(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return // the bounds are TestLoadStaysInside's
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "x.yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if af, err := yaml.Extract(path, data); err == nil && !bytes.Contains(data, []byte("*")) {
			if _, n := checkSyntax(path, documents(af), math.MaxInt); n > nodeBound(data) {
				t.Errorf("%d nodes, nodeBound %d", n, nodeBound(data))
			}
		}
		cfg, err := LoadDocuments(cuecontext.New(), dir)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("config %v and error %v", cfg, err)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			for _, l := range e.Lines {
				if !strings.HasPrefix(l, path+":") {
					t.Errorf("an error line without the file: %q", l)
				}
			}
			return
		}
		for _, d := range cfg.Workloads {
			if got := d.Pos.Filename(); got != path {
				t.Errorf("document %s at %q, want in %s", d.Kind, got, path)
			}
		}
		for _, v := range []cue.Value{cfg.HyperConverged, cfg.HostPathProvisioner} {
			if got := v.Pos().Filename(); v.Exists() && got != path {
				t.Errorf("%v at %q, want in %s", v.Pos(), got, path)
			}
		}
	})
}
