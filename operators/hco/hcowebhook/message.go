package hcowebhook

import (
	"errors"
	"regexp"
	"strings"

	"github.com/converge-dev/converge/internal/graph"
)

// position is the "file:line:col: " that starts a graph.Error line.
var position = regexp.MustCompile(`^[^:\n]*:\d+:\d+: `)

// Message takes the object's name (e.g. "HyperConverged ns/name") and a
// config or render error, and gives the denial message: one line per
// finding, each `<name>: <CUE path>: <message>`. The path and message are
// the ones `converge vet` prints after its file:line:col (a position in
// the request body means nothing to the user, so it is replaced by the
// name); identical lines are merged.
func Message(name string, err error) string {
	var lines []string
	var ge *graph.Error
	if errors.As(err, &ge) {
		lines = ge.Lines
	} else {
		lines = strings.Split(err.Error(), "\n")
	}
	seen := map[string]bool{}
	var out []string
	for _, l := range lines {
		l = name + ": " + strings.TrimPrefix(position.ReplaceAllString(l, ""), name+": ")
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
