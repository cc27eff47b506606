package config

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
)

// checkSyntax checks the documents of a file, as CUE's YAML decoder gave
// them, for what the decoder lets through but Kubernetes refuses or CUE
// cannot compile, and gives one line per finding, each
// "file:line:col: path: message":
//
//   - a key given twice in one mapping (YAML requires keys to be unique;
//     the API server's decoder refuses a duplicate);
//   - an integer outside int64, the range of Kubernetes' integers;
//   - .inf and .nan, which JSON, and so Kubernetes, cannot hold;
//   - a mapping, list or file of more than MaxCollectionItems keys,
//     items or documents;
//   - more than left nodes (mappings, lists and scalars): the file takes
//     the config above MaxNodes.
//
// It also rewrites in place the integer literals the decoder marks as
// floats ("number & 3" for `!!float 3`, which CUE does not compile) to
// the integer itself, which is the same CUE value. file names the file
// in a finding without a position. It gives the findings and the number
// of nodes.
func checkSyntax(file string, docs []ast.Expr, left int) ([]string, int) {
	c := checker{file: file, left: left}
	if len(docs) > MaxCollectionItems {
		return []string{fmt.Sprintf("%s: %d documents; a config file holds at most %d (MaxCollectionItems)", file, len(docs), MaxCollectionItems)}, 0
	}
	for _, d := range docs {
		c.path = c.path[:0]
		c.expr(d)
	}
	return c.lines, left - c.left
}

// checker walks documents; path is the field path of the node it is at,
// a stack (a deep document costs no copies of it); left is how many more
// nodes it may meet.
type checker struct {
	file  string
	lines []string
	path  []string
	left  int
}

func (c *checker) addf(pos token.Pos, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if len(c.path) > 0 {
		line = strings.Join(c.path, ".") + ": " + line
	}
	at := c.file
	if pos.IsValid() {
		at = pos.String()
	}
	c.lines = append(c.lines, at+": "+line)
}

func (c *checker) expr(x ast.Expr) {
	if c.left < 0 {
		return
	}
	if c.left--; c.left < 0 {
		c.addf(x.Pos(), "the config holds more than %d YAML nodes (MaxNodes) by here; a config is a handful of manifests", MaxNodes)
		return
	}
	switch x := x.(type) {
	case *ast.StructLit:
		if len(x.Elts) > MaxCollectionItems {
			c.addf(x.Pos(), "a mapping of %d keys; a config's mappings hold at most %d (MaxCollectionItems)", len(x.Elts), MaxCollectionItems)
			return
		}
		c.fields(x.Elts)
	case *ast.ListLit:
		if len(x.Elts) > MaxCollectionItems {
			c.addf(x.Pos(), "a list of %d items; a config's lists hold at most %d (MaxCollectionItems)", len(x.Elts), MaxCollectionItems)
			return
		}
		for i, e := range x.Elts {
			c.path = append(c.path, strconv.Itoa(i))
			c.expr(e)
			c.path = c.path[:len(c.path)-1]
		}
	case *ast.UnaryExpr:
		if lit, ok := x.X.(*ast.BasicLit); ok && x.Op == token.SUB {
			c.number(lit, true)
		}
	case *ast.BasicLit:
		c.number(x, false)
	}
}

// fields checks the fields of one mapping: each key once.
func (c *checker) fields(decls []ast.Decl) {
	first := map[string]token.Pos{}
	for _, d := range decls {
		switch d := d.(type) {
		case *ast.Field:
			name, _, err := ast.LabelName(d.Label)
			if err != nil {
				c.expr(d.Value)
				continue
			}
			c.path = append(c.path, name)
			if at, ok := first[name]; ok {
				c.addf(d.Label.Pos(), "key %q given twice in one mapping (first at %s); YAML keys are unique", name, at)
			} else {
				first[name] = d.Label.Pos()
			}
			c.expr(d.Value)
			c.path = c.path[:len(c.path)-1]
		case *ast.EmbedDecl:
			c.expr(d.Expr)
		}
	}
}

var (
	minInt64 = big.NewInt(math.MinInt64)
	maxInt64 = big.NewInt(math.MaxInt64)
)

// number checks a numeric literal (negated when neg).
func (c *checker) number(lit *ast.BasicLit, neg bool) {
	if lit.Kind != token.INT && lit.Kind != token.FLOAT {
		return
	}
	sign := ""
	if neg {
		sign = "-"
	}
	switch lit.Value {
	case "Inf", "+Inf", "NaN":
		what := map[string]string{"Inf": "infinity", "+Inf": "infinity", "NaN": "NaN"}[lit.Value]
		c.addf(lit.Pos(), "%s%s (YAML's .inf or .nan) is not a number Kubernetes can hold: JSON has no infinity and no NaN", sign, what)
		return
	}
	if n, ok := strings.CutPrefix(lit.Value, "number & "); ok {
		// yaml.v3 tags an integer float when it fits no 64-bit integer,
		// and `!!float 3` is one: both are integers to CUE.
		lit.Value, lit.Kind = n, token.INT
	}
	if lit.Kind != token.INT {
		return
	}
	i, ok := new(big.Int).SetString(sign+lit.Value, 0)
	if !ok {
		return // CUE's compiler names what it cannot read
	}
	if i.Cmp(minInt64) < 0 || i.Cmp(maxInt64) > 0 {
		c.addf(lit.Pos(), "integer %s%s is out of range: Kubernetes integers are 64-bit, from %d to %d (a quantity such as memory is a string: \"64Gi\")",
			sign, lit.Value, int64(math.MinInt64), int64(math.MaxInt64))
	}
}
