// Package summary turns the output of `make bench` (Go benchmark result
// lines, read with golang.org/x/perf/benchfmt) into the table of issue
// 18: each figure converge reached next to the floor or anchor measured
// in the same run, their ratio, the goal and whether it is met.
package summary

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// Results are benchmark figures by name (without the -GOMAXPROCS suffix,
// as "BenchmarkApply/converge/first") and unit as printed ("ns/op",
// "x-floor", …): every value seen, in order (a -count run gives
// several).
type Results map[string]map[string][]float64

// procs is the -GOMAXPROCS suffix of a benchmark name.
var procs = regexp.MustCompile(`-\d+$`)

// Read parses benchmark output (other lines are skipped) from r, named
// file in errors, into res. An unparsable result line is an error naming
// the file and line.
func Read(res Results, r io.Reader, file string) error {
	br := benchfmt.NewReader(r, file)
	for br.Scan() {
		switch rec := br.Result().(type) {
		case *benchfmt.Result:
			name := "Benchmark" + procs.ReplaceAllString(string(rec.Name.Full()), "")
			if res[name] == nil {
				res[name] = map[string][]float64{}
			}
			for _, v := range rec.Values {
				unit, value := v.OrigUnit, v.OrigValue
				if unit == "" {
					unit, value = v.Unit, v.Value
				}
				res[name][unit] = append(res[name][unit], value)
			}
		case *benchfmt.SyntaxError:
			return rec
		}
	}
	return br.Err()
}

// Range is the smallest and largest of one figure's values; NaN when
// none was measured.
type Range struct{ Min, Max float64 }

// None is the Range of a figure not measured.
var None = Range{math.NaN(), math.NaN()}

// Missing reports whether the figure was not measured.
func (r Range) Missing() bool { return math.IsNaN(r.Min) }

// Get is the Range of name's unit figure, scaled by scale.
func (res Results) Get(name, unit string, scale float64) Range {
	vs := res[name][unit]
	if len(vs) == 0 {
		return None
	}
	r := Range{math.Inf(1), math.Inf(-1)}
	for _, v := range vs {
		r.Min, r.Max = min(r.Min, v*scale), max(r.Max, v*scale)
	}
	return r
}

// String prints the range with unit: "46.2 ms", "1.08–1.24×", "–".
func (r Range) String(unit string) string {
	if r.Missing() {
		return "–"
	}
	f := func(v float64) string {
		if math.Abs(v) >= 100 {
			return fmt.Sprintf("%.0f", v)
		}
		if math.Abs(v) >= 10 {
			return fmt.Sprintf("%.1f", v)
		}
		return fmt.Sprintf("%.2f", v)
	}
	s := f(r.Min)
	if f(r.Max) != s {
		s += "–" + f(r.Max)
	}
	if unit == "×" {
		return s + "×"
	}
	if unit != "" {
		s += " " + unit
	}
	return s
}

// ratio is the Range of a/b over their values paired in order (the
// same iteration of a -count run); None when either is missing or their
// counts differ.
func (res Results) ratio(aName, aUnit, bName, bUnit string) Range {
	a, b := res[aName][aUnit], res[bName][bUnit]
	if len(a) == 0 || len(a) != len(b) {
		return None
	}
	r := Range{math.Inf(1), math.Inf(-1)}
	for i := range a {
		q := a[i] / b[i]
		r.Min, r.Max = min(r.Min, q), max(r.Max, q)
	}
	return r
}

// Row is one line of the table.
type Row struct {
	What     string
	Converge string // converge's figure
	Anchor   string // the floor or anchor, same run
	Ratio    Range  // converge / floor (or as Goal says)
	Goal     string
	Met      string // "yes", "no" or "–" (not measured)
}

// Table formats rows as Markdown.
func Table(rows []Row) string {
	var s strings.Builder
	s.WriteString("| what | converge | floor / anchor (same run) | ratio | goal | met |\n| --- | ---: | ---: | ---: | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&s, "| %s | %s | %s | %s | %s | %s |\n", r.What, r.Converge, r.Anchor, r.Ratio.String("×"), r.Goal, r.Met)
	}
	return s.String()
}

// met says whether every value of v is within [lo, hi]: "yes", "no", or
// "–" when v is missing.
func met(v Range, lo, hi float64) string {
	switch {
	case v.Missing():
		return "–"
	case v.Min >= lo && v.Max <= hi:
		return "yes"
	}
	return "no"
}
