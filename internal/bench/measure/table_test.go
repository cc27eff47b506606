package measure

import (
	"math"
	"testing"
	"time"
)

func TestTable(t *testing.T) {
	nan := math.NaN()
	const header = "| what | converge | flux | flux / converge |\n| --- | ---: | ---: | ---: |\n"
	for _, tc := range []struct {
		name string
		rows []Row
		want string
	}{
		{"ratio of the other side to converge", []Row{{"commit → applied", "ms", 400, 1000}},
			header + "| commit → applied | 400 ms | 1000 ms | 2.50× |\n"},
		{"small figures keep a decimal", []Row{{"no-op", "requests", 5, 12.5}},
			header + "| no-op | 5.0 requests | 12.5 requests | 2.50× |\n"},
		{"a missing side has no ratio", []Row{{"RSS", "MiB", nan, 80}, {"x", "", 3, nan}},
			header + "| RSS | – | 80.0 MiB | – |\n| x | 3.0 | – | – |\n"},
		{"zero on converge's side has no ratio", []Row{{"requests", "", 0, 7}},
			header + "| requests | 0.0 | 7.0 | – |\n"},
		{"no rows", nil, header},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Table("flux", tc.rows); got != tc.want {
				t.Errorf("Table =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		ds   []time.Duration
		want float64
	}{
		{"odd", []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}, 2},
		{"even takes the upper", []time.Duration{4 * time.Millisecond, time.Millisecond}, 4},
		{"fraction", []time.Duration{1500 * time.Microsecond}, 1.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Median(tc.ds); got != tc.want {
				t.Errorf("Median = %v, want %v", got, tc.want)
			}
		})
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
	if got := MedianOf([]float64{9, 1, 5}); got != 5 {
		t.Errorf("MedianOf = %v, want 5", got)
	}
	if got := MedianOf(nil); !math.IsNaN(got) {
		t.Errorf("MedianOf(nil) = %v, want NaN", got)
	}
}
