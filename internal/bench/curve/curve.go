// Package curve draws the cost-vs-size curves of converge's scale
// benchmarks (internal/bench/scale) as PNG files with gonum.org/v1/plot:
// one line per measured figure, the size on the x axis.
package curve

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Point is one measurement: the size of the run (VMs, Syncs) and the
// figure measured at that size.
type Point struct{ Size, Value float64 }

// Series is one line of a plot: its legend and its points, in any order
// (Plot sorts them by size).
type Series struct {
	Name   string
	Points []Point
}

// Plot is one PNG: its title, axis labels and lines.
type Plot struct {
	Title, X, Y string
	Series      []Series
}

// Check refuses a plot that would draw nothing true: no series, a series
// without a name or points, two points of one size, or a size or value
// that is NaN, infinite or negative (sizes and costs are not). Errors name
// the plot, the series and the point.
func (p Plot) Check() error {
	if len(p.Series) == 0 {
		return fmt.Errorf("plot %q: no series", p.Title)
	}
	for _, s := range p.Series {
		if s.Name == "" {
			return fmt.Errorf("plot %q: a series has no name", p.Title)
		}
		if len(s.Points) == 0 {
			return fmt.Errorf("plot %q: series %q has no points", p.Title, s.Name)
		}
		seen := map[float64]bool{}
		for i, pt := range s.Points {
			for _, v := range []struct {
				what string
				x    float64
			}{{"size", pt.Size}, {"value", pt.Value}} {
				if math.IsNaN(v.x) || math.IsInf(v.x, 0) || v.x < 0 {
					return fmt.Errorf("plot %q: series %q point %d: %s %v, want a finite non-negative number", p.Title, s.Name, i, v.what, v.x)
				}
			}
			if seen[pt.Size] {
				return fmt.Errorf("plot %q: series %q: two points of size %v", p.Title, s.Name, pt.Size)
			}
			seen[pt.Size] = true
		}
	}
	return nil
}

// Width and Height are the size of the PNGs WritePNG draws.
const (
	Width  = 16 * vg.Centimeter
	Height = 10 * vg.Centimeter
)

// WritePNG checks p (Plot.Check) and draws it as a Width × Height PNG to
// path (its directory created), each series a line with its points
// marked, y from 0.
func (p Plot) WritePNG(path string) error {
	if err := p.Check(); err != nil {
		return err
	}
	pl := plot.New()
	pl.Title.Text, pl.X.Label.Text, pl.Y.Label.Text = p.Title, p.X, p.Y
	pl.Y.Min = 0
	pl.Add(plotter.NewGrid())
	var lines []any
	for _, s := range p.Series {
		xys := make(plotter.XYs, len(s.Points))
		for i, pt := range s.Points {
			xys[i] = plotter.XY{X: pt.Size, Y: pt.Value}
		}
		sortBySize(xys)
		lines = append(lines, s.Name, xys)
	}
	if err := plotutil.AddLinePoints(pl, lines...); err != nil {
		return fmt.Errorf("plot %q: %w", p.Title, err)
	}
	pl.Legend.Top = true
	pl.Legend.Left = true
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := pl.Save(Width, Height, path); err != nil {
		return errors.Join(fmt.Errorf("plot %q: writing %s", p.Title, path), err)
	}
	return nil
}

// sortBySize sorts xys by X (insertion sort: a sweep has a few sizes).
func sortBySize(xys plotter.XYs) {
	for i := 1; i < len(xys); i++ {
		for j := i; j > 0 && xys[j].X < xys[j-1].X; j-- {
			xys[j], xys[j-1] = xys[j-1], xys[j]
		}
	}
}
