package graph

import (
	"fmt"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/load"
	cuejson "cuelang.org/go/encoding/json"

	"github.com/converge-dev/converge"
)

// EmbeddedPackage names a CUE package of converge's embedded CUE module by
// its directory from the module root ("components/ssp/commontemplates").
// As a value in RoleInputs.Inputs it stands for that package's value:
// Roles loads and builds the package on first use, keeps it for the
// engine's life and fills it in at inputs.<key>. Large data only some
// clusters need lives in such a package, which components does not
// import, so that NewEngine does not pay for it everywhere.
type EmbeddedPackage string

// CommonTemplatesPackage is ssp-operator's pinned common-templates bundle
// (components/ssp/commontemplates: Version, Bundle), the SSP roles'
// inputs.commonTemplates where the Template API is served. Built, it holds
// about 15 MiB and takes about 0.4 s of CPU, which every engine paid while
// it was part of package ssp.
const CommonTemplatesPackage EmbeddedPackage = "components/ssp/commontemplates"

// TektonTasksPackage is the pinned KubeVirt Tekton tasks
// (components/ssp/tektontasks: Releases, Tasks), the graph's tektonTasks
// where the target serves tekton.dev/v1 Task (the tektonPipelines fact).
const TektonTasksPackage EmbeddedPackage = "components/ssp/tektontasks"

// tektonTasks gives the graph's tektonTasks input for the validated facts
// fv: nil when fv.tektonPipelines is false, else the Tasks of
// TektonTasksPackage as plain data (see data), built on first use and
// kept as JSON, from which each render compiles it again. The caller
// holds the engine's lock.
func (e *Engine) tektonTasks(fv cue.Value) (ast.Expr, error) {
	if on, err := fv.LookupPath(cue.ParsePath("tektonPipelines")).Bool(); err != nil || !on {
		return nil, nil
	}
	if e.tektonJSON == nil {
		// Built once and kept as JSON only: the built package is not
		// cached (e.packages), its JSON is all a render needs.
		v, err := e.loadEmbedded(TektonTasksPackage)
		if err != nil {
			return nil, err
		}
		b, err := v.LookupPath(cue.ParsePath("Tasks")).MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("embedded CUE %s: %w", TektonTasksPackage, Format(err))
		}
		e.tektonJSON = b
	}
	expr, err := cuejson.Extract("", e.tektonJSON)
	if err != nil {
		return nil, Format(err)
	}
	return expr, nil
}

// embedded gives the value of package p, loading and building it on first
// use. The caller holds the engine's lock. An error names the package: a
// directory that holds no CUE package, or CUE that does not build.
func (e *Engine) embedded(p EmbeddedPackage) (cue.Value, error) {
	if v, ok := e.packages[p]; ok {
		return v, nil
	}
	v, err := e.loadEmbedded(p)
	if err != nil {
		return cue.Value{}, err
	}
	if e.packages == nil {
		e.packages = map[EmbeddedPackage]cue.Value{}
	}
	e.packages[p] = v
	return v, nil
}

// loadEmbedded loads and builds package p, without keeping it. The
// caller holds the engine's lock.
func (e *Engine) loadEmbedded(p EmbeddedPackage) (cue.Value, error) {
	insts := load.Instances([]string{"./" + string(p)}, &load.Config{FS: converge.CUE, Dir: "/"})
	if len(insts) != 1 {
		return cue.Value{}, fmt.Errorf("embedded CUE %s: %d packages, want 1", p, len(insts))
	}
	if err := insts[0].Err; err != nil {
		return cue.Value{}, fmt.Errorf("loading embedded CUE %s: %w", p, err)
	}
	v := e.ctx.BuildInstance(insts[0])
	if err := v.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("building embedded CUE %s: %w", p, Format(err))
	}
	return v, nil
}
