package config

import (
	"fmt"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/errors"
	"cuelang.org/go/encoding/yaml"
)

// decodeFile decodes the YAML (or JSON) documents of f into CUE values
// that keep f's positions, leaving out empty documents (a `---` with
// nothing after it). It gives one line per problem instead, each naming
// f.path and, where there is one, the line, column and field path: text
// that is not UTF-8 YAML, a syntax error, a duplicate key, a number
// Kubernetes cannot hold, a collection above MaxCollectionItems, more
// than left nodes (checkSyntax; nodeBound before decoding), and a file
// that holds no document at all (empty, or comments only). It gives the
// number of nodes too.
func decodeFile(ctx *cue.Context, f file, left int) ([]cue.Value, []string, int) {
	if line := checkText(f.path, f.data); line != "" {
		return nil, []string{line}, 0
	}
	if n := nodeBound(f.data); n > left {
		return nil, []string{fmt.Sprintf("%s: may hold more YAML nodes than the config's %d (MaxNodes; counting the line feeds and , : - ? [ { of its text); a config is a handful of manifests", f.path, MaxNodes)}, 0
	}
	af, err := yaml.Extract(f.path, f.data)
	if err != nil {
		return nil, []string{placeYAMLError(f.path, f.data, err)}, 0
	}
	lines, nodes := checkSyntax(f.path, documents(af), left)
	if len(lines) > 0 {
		return nil, lines, nodes
	}
	v := ctx.BuildFile(af)
	if err := v.Err(); err != nil {
		return nil, placeCUEError(f.path, err), nodes
	}
	docs := []cue.Value{v}
	if v.Kind() == cue.ListKind {
		docs = docs[:0]
		it, _ := v.List()
		for it.Next() {
			docs = append(docs, it.Value())
		}
	}
	kept := docs[:0]
	for _, d := range docs {
		if d.Kind() == cue.NullKind || d.IncompleteKind() == cue.TopKind {
			continue // an empty YAML document, or one of comments only
		}
		kept = append(kept, d)
	}
	if len(kept) == 0 {
		return nil, []string{fmt.Sprintf("%s: holds no YAML document (it is empty or holds only comments); a config file holds one or more manifests", f.path)}, nodes
	}
	return kept, nil, nodes
}

// documents gives the documents of a file yaml.Extract decoded: several
// as the elements of a list, one as the file's declarations.
func documents(f *ast.File) []ast.Expr {
	if len(f.Decls) == 1 {
		if e, ok := f.Decls[0].(*ast.EmbedDecl); ok {
			if l, ok := e.Expr.(*ast.ListLit); ok {
				return l.Elts
			}
			return []ast.Expr{e.Expr}
		}
	}
	return []ast.Expr{&ast.StructLit{Elts: f.Decls}}
}

// placeCUEError gives CUE's error as lines "file:line:col: path:
// message", and path (the file) for an error without a position.
func placeCUEError(path string, err error) []string {
	var lines []string
	for _, e := range errors.Errors(err) {
		format, args := e.Msg()
		line := fmt.Sprintf(format, args...)
		if p := strings.Join(e.Path(), "."); p != "" {
			line = p + ": " + line
		}
		if pos := e.Position(); pos.IsValid() {
			line = fmt.Sprintf("%s: %s", pos, line)
		} else {
			line = path + ": " + line
		}
		lines = append(lines, line)
	}
	return lines
}
