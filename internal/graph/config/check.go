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
//   - .inf and .nan, which JSON, and so Kubernetes, cannot hold.
//
// It also rewrites in place the integer literals the decoder marks as
// floats ("number & 3" for `!!float 3`, which CUE does not compile) to
// the integer itself, which is the same CUE value.
func checkSyntax(docs []ast.Expr) []string {
	var c checker
	for _, d := range docs {
		c.expr(d, nil)
	}
	return c.lines
}

type checker struct{ lines []string }

func (c *checker) addf(pos token.Pos, path []string, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if len(path) > 0 {
		line = strings.Join(path, ".") + ": " + line
	}
	c.lines = append(c.lines, fmt.Sprintf("%s: %s", pos, line))
}

func (c *checker) expr(x ast.Expr, path []string) {
	switch x := x.(type) {
	case *ast.StructLit:
		c.fields(x.Elts, path)
	case *ast.ListLit:
		for i, e := range x.Elts {
			c.expr(e, append(path[:len(path):len(path)], strconv.Itoa(i)))
		}
	case *ast.UnaryExpr:
		if lit, ok := x.X.(*ast.BasicLit); ok && x.Op == token.SUB {
			c.number(lit, true, path)
		}
	case *ast.BasicLit:
		c.number(x, false, path)
	}
}

// fields checks the fields of one mapping: each key once.
func (c *checker) fields(decls []ast.Decl, path []string) {
	first := map[string]token.Pos{}
	for _, d := range decls {
		switch d := d.(type) {
		case *ast.Field:
			name, _, err := ast.LabelName(d.Label)
			if err != nil {
				c.expr(d.Value, path)
				continue
			}
			sub := append(path[:len(path):len(path)], name)
			if at, ok := first[name]; ok {
				c.addf(d.Label.Pos(), sub, "key %q given twice in one mapping (first at %s); YAML keys are unique", name, at)
			} else {
				first[name] = d.Label.Pos()
			}
			c.expr(d.Value, sub)
		case *ast.EmbedDecl:
			c.expr(d.Expr, path)
		}
	}
}

var (
	minInt64 = big.NewInt(math.MinInt64)
	maxInt64 = big.NewInt(math.MaxInt64)
)

// number checks a numeric literal (negated when neg).
func (c *checker) number(lit *ast.BasicLit, neg bool, path []string) {
	if lit.Kind != token.INT && lit.Kind != token.FLOAT {
		return
	}
	sign := ""
	if neg {
		sign = "-"
	}
	switch lit.Value {
	case "Inf", "+Inf", "NaN":
		c.addf(lit.Pos(), path, "%s%s is not a number Kubernetes can hold: JSON has no infinity and no NaN", sign, lit.Value)
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
		c.addf(lit.Pos(), path, "integer %s%s is out of range: Kubernetes integers are 64-bit, from %d to %d (a quantity such as memory is a string: \"64Gi\")",
			sign, lit.Value, int64(math.MinInt64), int64(math.MaxInt64))
	}
}
