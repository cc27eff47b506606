package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"

	"github.com/converge-dev/converge"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/graph/config"
)

// example is the example config the render benchmarks render.
var example = filepath.Join("..", "..", "testdata", "example")

// BenchmarkRender renders the example config (validation, derivation,
// jsonpatch, ordering, CRDs) with a warm engine (its CRDs loaded, the
// example rendered once):
//
//   - one-field-change: each render has one field of the HC changed
//     (spec.liveMigrationConfig.parallelMigrationsPerCluster), what a
//     commit to the config costs;
//   - uncached: the same config each time, the engine's render cache off:
//     every render derives the whole graph;
//   - unchanged: the same config each time with the engine as converge
//     runs it, served from its render cache after the first: what a
//     resync of an unchanged config costs, the floor of a render;
//   - schema-only: the anchor, no render: the HC unified with the schema's
//     #HyperConverged and validated, the least CUE evaluation a checked
//     render does.
func BenchmarkRender(b *testing.B) {
	b.Run("one-field-change", func(b *testing.B) {
		e := warmEngine(b)
		hc, err := os.ReadFile(filepath.Join(example, "hyperconverged.yaml"))
		if err != nil {
			b.Fatal(err)
		}
		hpp, err := os.ReadFile(filepath.Join(example, "hostpathprovisioner.yaml"))
		if err != nil {
			b.Fatal(err)
		}
		const field = "parallelMigrationsPerCluster: 5"
		if !strings.Contains(string(hc), field) {
			b.Fatalf("the example has no %q", field)
		}
		dir := b.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "hostpathprovisioner.yaml"), hpp, 0o644); err != nil {
			b.Fatal(err)
		}
		i := 0
		for b.Loop() {
			b.StopTimer()
			i++
			changed := strings.Replace(string(hc), field, "parallelMigrationsPerCluster: "+strconv.Itoa(100+i), 1)
			if err := os.WriteFile(filepath.Join(dir, "hyperconverged.yaml"), []byte(changed), 0o644); err != nil {
				b.Fatal(err)
			}
			cfg, err := e.LoadConfig(dir)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := e.Render(cfg, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		e := warmEngine(b)
		e.SetRenderCacheSize(0) // drops the warm-up render too
		renderLoop(b, e)
	})
	b.Run("unchanged", func(b *testing.B) {
		renderLoop(b, warmEngine(b))
	})
	b.Run("schema-only", func(b *testing.B) {
		ctx := cuecontext.New()
		inst := load.Instances([]string{"./schema"}, &load.Config{FS: converge.CUE, Dir: "/"})[0]
		schema := ctx.BuildInstance(inst)
		if err := schema.Err(); err != nil {
			b.Fatal(err)
		}
		def := schema.LookupPath(cue.MakePath(cue.Def("#HyperConverged")))
		cfg, err := config.Load(ctx, example)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := cfg.HyperConverged.Unify(def).Validate(cue.Concrete(true)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// warmEngine gives a new engine with its CRDs loaded that has rendered
// the example once (which its render cache keeps).
func warmEngine(b *testing.B) *graph.Engine {
	e, err := graph.NewEngine()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.CRDs(); err != nil {
		b.Fatal(err)
	}
	cfg, err := e.LoadConfig(example)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.Render(cfg, nil); err != nil {
		b.Fatal(err)
	}
	return e
}

// renderLoop renders the example with e at each iteration.
func renderLoop(b *testing.B, e *graph.Engine) {
	cfg, err := e.LoadConfig(example)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := e.Render(cfg, nil); err != nil {
			b.Fatal(err)
		}
	}
}
