package measure

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Row is one line of a side-by-side table: what was measured, its unit,
// and the figure of each side. A side not measured is NaN.
type Row struct {
	What, Unit      string
	Converge, Other float64
}

// Table formats rows as a Markdown table whose columns are the row's
// name, converge's figure, the other side's (named other in the header)
// and their ratio other/converge ("–" when either side is missing or
// converge's figure is 0). Figures are printed with three significant
// digits, at most one decimal place.
func Table(other string, rows []Row) string {
	var s strings.Builder
	fmt.Fprintf(&s, "| what | converge | %s | %s / converge |\n| --- | ---: | ---: | ---: |\n", other, other)
	for _, r := range rows {
		ratio := "–"
		if !math.IsNaN(r.Converge) && !math.IsNaN(r.Other) && r.Converge != 0 {
			ratio = fmt.Sprintf("%.2f×", r.Other/r.Converge)
		}
		fmt.Fprintf(&s, "| %s | %s | %s | %s |\n", r.What, figure(r.Converge, r.Unit), figure(r.Other, r.Unit), ratio)
	}
	return s.String()
}

// figure prints v with unit, "–" for NaN.
func figure(v float64, unit string) string {
	if math.IsNaN(v) {
		return "–"
	}
	f := fmt.Sprintf("%.1f", v)
	if math.Abs(v) >= 100 {
		f = fmt.Sprintf("%.0f", v)
	}
	if unit == "" {
		return f
	}
	return f + " " + unit
}

// Median returns the median of ds (the upper one of an even count) in
// milliseconds, NaN for none. ds is sorted in place.
func Median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	slices.Sort(ds)
	return float64(ds[len(ds)/2]) / float64(time.Millisecond)
}

// MedianOf returns the median of vs (the upper one of an even count), NaN
// for none. vs is sorted in place.
func MedianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}
