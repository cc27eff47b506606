package curve

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	good := Series{Name: "p50", Points: []Point{{100, 1.5}, {250, 1.7}}}
	for _, tc := range []struct {
		name string
		p    Plot
		err  string
	}{
		{"good", Plot{Title: "latency", Series: []Series{good}}, ""},
		{"no series", Plot{Title: "latency"}, "no series"},
		{"unnamed series", Plot{Title: "latency", Series: []Series{{Points: good.Points}}}, "has no name"},
		{"no points", Plot{Title: "latency", Series: []Series{{Name: "p99"}}}, `series "p99" has no points`},
		{"NaN value", Plot{Title: "latency", Series: []Series{{Name: "p99", Points: []Point{{100, math.NaN()}}}}}, "point 0: value NaN"},
		{"infinite size", Plot{Title: "latency", Series: []Series{{Name: "p99", Points: []Point{{1, 1}, {math.Inf(1), 1}}}}}, "point 1: size +Inf"},
		{"negative value", Plot{Title: "rss", Series: []Series{{Name: "rss", Points: []Point{{1, -2}}}}}, "value -2"},
		{"two points of one size", Plot{Title: "rss", Series: []Series{{Name: "rss", Points: []Point{{100, 1}, {100, 2}}}}}, "two points of size 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Check()
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.p.Title) {
				t.Fatalf("Check = %v, want an error naming %q and containing %q", err, tc.p.Title, tc.err)
			}
		})
	}
}

func TestWritePNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "latency.png")
	p := Plot{Title: "VMI creation → Running", X: "VMs", Y: "ms", Series: []Series{
		{Name: "p50", Points: []Point{{500, 90}, {100, 40}, {250, 60}}},
		{Name: "p99", Points: []Point{{100, 80}, {250, 120}, {500, 300}}},
	}}
	if err := p.WritePNG(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", path, err)
	}
	// 16 × 10 cm at gonum's default 96 dpi.
	if b := img.Bounds(); b.Dx() != 605 || b.Dy() != 378 {
		t.Errorf("PNG is %d × %d, want 605 × 378", b.Dx(), b.Dy())
	}
	bad := filepath.Join(t.TempDir(), "bad.png")
	if err := (Plot{Title: "empty"}).WritePNG(bad); err == nil {
		t.Error("WritePNG of a plot without series succeeded")
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("a refused plot left %s: %v", bad, err)
	}
}
