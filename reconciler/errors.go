package reconciler

import "fmt"

// Phase is the part of Pipeline.Sync an error happened in.
type Phase string

// Phases of a sync, in the order they run.
const (
	// PhaseApply: the server-side apply of a stage's objects (an invalid or
	// forbidden object, an immutable field, the API server unreachable).
	PhaseApply Phase = "Apply"
	// PhaseHealth: a stage's objects did not become ready (the kstatus
	// wait failed or timed out) or their health could not be read.
	PhaseHealth Phase = "Health"
	// PhasePrune: an object that left the config could not be deleted.
	PhasePrune Phase = "Prune"
)

// StageError is the error Pipeline.Sync returns when applying, health
// checking or pruning failed: Phase says which, Stage names the stage
// (graph.Stage.Name: "crds" or the components joined by "+"; empty for
// PhasePrune) and Err is the cause, naming the object first. Callers
// classify with errors.As; other Sync errors (reading the inventory or
// the live state, writing the HC status or the inventory) are not
// StageErrors.
type StageError struct {
	Phase Phase
	Stage string
	Err   error
}

// Error gives "stage <stage>: <cause>", or the cause alone when Stage is
// empty (a prune error names the object first).
func (e *StageError) Error() string {
	if e.Stage == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("stage %s: %v", e.Stage, e.Err)
}

// Unwrap returns the cause.
func (e *StageError) Unwrap() error { return e.Err }
