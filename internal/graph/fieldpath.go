package graph

import (
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/token"
)

// fieldSelectors parses a field path as the admission checks write it —
// dotted field names, list indexes and map keys in brackets
// (spec.template.spec.domain.devices.disks[1].containerDisk,
// spec.domain.resources.requests[nvidia.com/gpu]) — into CUE selectors.
// A bracketed number is a list index, anything else in brackets a map
// key. A leading "." is allowed.
func fieldSelectors(path string) []cue.Selector {
	var sels []cue.Selector
	name := strings.Builder{}
	flush := func() {
		if name.Len() > 0 {
			sels = append(sels, cue.Str(name.String()))
			name.Reset()
		}
	}
	for i := 0; i < len(path); i++ {
		switch c := path[i]; c {
		case '.':
			flush()
		case '[':
			flush()
			end := strings.IndexByte(path[i:], ']')
			if end < 0 {
				name.WriteString(path[i:])
				i = len(path)
				continue
			}
			key := path[i+1 : i+end]
			if n, err := strconv.Atoi(key); err == nil && n >= 0 {
				sels = append(sels, cue.Index(n))
			} else {
				sels = append(sels, cue.Str(key))
			}
			i += end
		default:
			name.WriteByte(c)
		}
	}
	flush()
	return sels
}

// deepestField gives the position of the deepest field of path (see
// fieldSelectors) that doc has, and that field's path in the same
// notation; the document's own position and "" when doc has none of it.
// A field's position is its label's: file:line:column of the user's YAML.
func deepestField(doc cue.Value, path string) (token.Pos, string) {
	sels := fieldSelectors(path)
	pos, found := doc.Pos(), 0
	for n := len(sels); n > 0; n-- {
		if v := doc.LookupPath(cue.MakePath(sels[:n]...)); v.Exists() {
			pos, found = v.Pos(), n
			break
		}
	}
	return pos, selectorsString(sels[:found])
}

// selectorsString writes selectors back in fieldSelectors' notation.
func selectorsString(sels []cue.Selector) string {
	var b strings.Builder
	for _, s := range sels {
		switch s.Type() {
		case cue.IndexLabel:
			b.WriteString("[" + s.String() + "]")
		default:
			name := s.Unquoted()
			if strings.ContainsAny(name, "./[]") {
				b.WriteString("[" + name + "]")
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(name)
		}
	}
	return b.String()
}
