// Package converge embeds the project's CUE module — the HyperConverged
// schema and the component graph — so that every binary evaluates exactly
// the CUE that users check their configs against with `cue vet`.
package converge

import "embed"

// CUE is the CUE module rooted at "/": cue.mod/module.cue, schema/ and
// components/. Load it with cue/load's Config.FS.
//
//go:embed cue.mod/module.cue schema/*.cue components
var CUE embed.FS
