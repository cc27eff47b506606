package graph

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// Format turns a CUE error into one error whose lines each read
// "FILE:LINE:COL: PATH: MESSAGE", naming first the position in the user's
// config (not the schema's) when there is one. Identical lines are merged.
func Format(err error) error {
	if err == nil {
		return nil
	}
	var lines []string
	seen := map[string]bool{}
	for _, e := range errors.Errors(err) {
		format, args := e.Msg()
		msg := fmt.Sprintf(format, shorten(args)...)
		if msg == "" || strings.Contains(msg, "%!") {
			// A plain error CUE wrapped (the YAML decoder's): its own
			// text, which carries its position.
			msg = e.Error()
		}
		path := strings.Join(e.Path(), ".")
		pos := bestPos(e)
		line := msg
		if path != "" {
			line = path + ": " + msg
		}
		if pos.IsValid() {
			line = fmt.Sprintf("%s:%d:%d: %s", pos.Filename(), pos.Line(), pos.Column(), line)
		}
		if !seen[line] {
			seen[line] = true
			lines = append(lines, line)
		}
	}
	sort.Strings(lines)
	return &Error{Lines: lines}
}

// maxArgLen bounds each value an error message quotes: an invalid
// 257-item list is shown by its start and end, not in full.
const maxArgLen = 160

// shorten replaces each argument of a CUE error message that prints
// longer than maxArgLen by its first and last characters around
// "… (N characters) …".
func shorten(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		r := []rune(fmt.Sprint(a))
		if len(r) <= maxArgLen {
			out[i] = a
			continue
		}
		out[i] = fmt.Sprintf("%s … (%d characters) … %s", string(r[:maxArgLen/2]), len(r), string(r[len(r)-maxArgLen/4:]))
	}
	return out
}

// Error is a validation or evaluation error, one finding per line.
type Error struct{ Lines []string }

func (e *Error) Error() string { return strings.Join(e.Lines, "\n") }

// bestPos picks the first position outside the embedded CUE module
// (the user's file), else the first position.
func bestPos(e errors.Error) token.Pos {
	ps := errors.Positions(e)
	for _, p := range ps {
		if !isEmbedded(p.Filename()) {
			return p
		}
	}
	if len(ps) > 0 {
		return ps[0]
	}
	return e.Position()
}

func isEmbedded(name string) bool {
	name = filepath.ToSlash(name)
	return strings.HasPrefix(name, "/schema/") || strings.HasPrefix(name, "/components/") ||
		strings.HasPrefix(name, "schema/") || strings.HasPrefix(name, "components/")
}
