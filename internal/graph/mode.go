package graph

import (
	"fmt"

	"cuelang.org/go/cue"
)

// Operators modes and the annotations that carry them (schema/annotations.cue
// #OperatorsAnnotation and components/graph.cue OperatorAnnotation).
const (
	// OperatorsAnnotation on the HyperConverged selects the mode of every
	// operand CR the graph derives: ModeNative (the default) or
	// ModeExternal.
	OperatorsAnnotation = "converge.dev/operators"
	// OperatorAnnotation is on every derived operand CR, with the mode:
	// converge's native operators act only on CRs marked ModeNative.
	OperatorAnnotation = "converge.dev/operator"
	// ModeNative: converge-controller holds one operator per operand CR
	// kind and runs each CR's roles.
	ModeNative = "native"
	// ModeExternal: the upstream operators run the operand CRs; converge
	// only derives them, as HCO does.
	ModeExternal = "external"
)

// withMode returns the HC document hc with OperatorsAnnotation set to the
// effective mode: sync (a Sync's spec.operators) when set, else the
// annotation the HC has, else ModeNative. It fails when sync is not a mode,
// or when sync and a valid annotation of the HC disagree. An annotation
// that is not a mode is left for the schema to refuse with its path.
func withMode(hc cue.Value, sync string) (cue.Value, error) {
	if sync != "" && sync != ModeNative && sync != ModeExternal {
		return hc, &Error{Lines: []string{fmt.Sprintf("spec.operators: %q is not an operators mode; allowed: %s or %s", sync, ModeNative, ModeExternal)}}
	}
	path := cue.MakePath(cue.Str("metadata"), cue.Str("annotations"), cue.Str(OperatorsAnnotation))
	annotated, err := hc.LookupPath(path).String()
	switch {
	case err == nil && annotated != ModeNative && annotated != ModeExternal:
		return hc, nil
	case err == nil && sync != "" && annotated != sync:
		pos := hc.LookupPath(path).Pos()
		where := "HyperConverged"
		if pos.IsValid() {
			where = fmt.Sprintf("%s:%d:%d", pos.Filename(), pos.Line(), pos.Column())
		}
		return hc, &Error{Lines: []string{fmt.Sprintf("%s: metadata.annotations.%q is %q but the Sync's spec.operators is %q: they select the same thing (who runs the operand CRs); remove one or make them agree",
			where, OperatorsAnnotation, annotated, sync)}}
	case err == nil:
		return hc, nil
	}
	mode := sync
	if mode == "" {
		mode = ModeNative
	}
	return hc.FillPath(path, mode), nil
}
