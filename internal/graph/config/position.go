package config

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// checkText refuses what yaml.v3 refuses without saying where: bytes that
// are not UTF-8, and the control characters YAML does not allow (every
// one but tab, line feed and carriage return). It gives
// "file:line:col: message" for the first one, or "" when the text is
// fine. A file that starts with a UTF-16 byte order mark is left to
// yaml.v3, which reads UTF-16.
func checkText(path string, data []byte) string {
	if bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) {
		return ""
	}
	for off := 0; off < len(data); {
		r, size := utf8.DecodeRune(data[off:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return fmt.Sprintf("%s: byte %#02x is not UTF-8: a config file is UTF-8 text", at(path, data, off), data[off])
		case !yamlPrintable(r):
			return fmt.Sprintf("%s: control character %U is not allowed in YAML", at(path, data, off), r)
		}
		off += size
	}
	return ""
}

// yamlPrintable is YAML 1.2's c-printable, as yaml.v3's reader checks it.
func yamlPrintable(r rune) bool {
	return r == 0x09 || r == 0x0a || r == 0x0d ||
		r >= 0x20 && r <= 0x7e || r == 0x85 ||
		r >= 0xa0 && r <= 0xd7ff || r >= 0xe000 && r <= 0xfffd ||
		r >= 0x10000 && r <= 0x10ffff
}

// at is "file:line:col" of byte offset off of data (col counts bytes,
// as CUE's positions do).
func at(path string, data []byte, off int) string {
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Sprintf("%s:%d:%d", path, line, col)
}

// lastLine is the number of the last line of data that holds a byte.
func lastLine(data []byte) int {
	n := bytes.Count(data, []byte{'\n'})
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return max(n, 1)
}

// parserProblems are yaml.v3's parser errors (as opposed to its scanner
// errors): it reports them with the 0-based line of their context, and
// without a line when that is the first.
var parserProblems = []string{
	"did not find expected <stream-start>",
	"did not find expected <document start>",
	"did not find expected node content",
	"did not find expected key",
	"did not find expected '-' indicator",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
	"found undefined tag handle",
}

var (
	yamlLine      = regexp.MustCompile(`^(\d+): (.*)$`)
	unknownAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)
)

// placeYAMLError gives the error of decoding the YAML of path (data) as
// "file:line: message". CUE passes yaml.v3's errors on as "file:N:
// message", where N is 1-based for a scanner error, 0-based for a parser
// error and missing on the first line; an unknown anchor has no line at
// all, so placeYAMLError looks for its first use. A problem at the end of
// the text is placed on its last line.
func placeYAMLError(path string, data []byte, err error) string {
	s := err.Error()
	rest, ok := strings.CutPrefix(s, path+":")
	if !ok {
		return s
	}
	rest = strings.TrimPrefix(rest, " ")
	line, msg := 0, rest
	if m := yamlLine.FindStringSubmatch(rest); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	for _, p := range parserProblems {
		if msg == p {
			line++
			break
		}
	}
	if line > 0 {
		// A problem at the end of the stream is on the last line, not
		// on the empty one after its line feed.
		return fmt.Sprintf("%s:%d: %s", path, min(line, lastLine(data)), msg)
	}
	if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		use := regexp.MustCompile(`\*` + regexp.QuoteMeta(m[1]) + `(?:[\s,\]}]|$)`)
		if loc := use.FindIndex(data); loc != nil {
			return fmt.Sprintf("%s: %s", at(path, data, loc[0]), msg)
		}
		return s
	}
	if strings.Contains(msg, "excessive aliasing") {
		return s
	}
	// A scanner error on the first line.
	return fmt.Sprintf("%s:1: %s", path, msg)
}
