package measure

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 … 1, unsorted
	}
	for _, tc := range []struct {
		name string
		ds   []time.Duration
		p    float64
		want float64
		err  string
	}{
		{"p50 of odd count is the middle", ms(30, 10, 20), 50, 20, ""},
		{"p50 of even count is the lower middle", ms(40, 10, 30, 20), 50, 20, ""},
		{"p99 of 100 is the 99th", ms(hundred...), 99, 99, ""},
		{"p100 is the maximum", ms(hundred...), 100, 100, ""},
		{"p1 of 100 is the minimum", ms(hundred...), 1, 1, ""},
		{"p99 of 10 is the maximum", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10, ""},
		{"one value", ms(7), 99, 7, ""},
		{"none", nil, 50, 0, "no durations"},
		{"p 0", ms(1), 0, 0, "want 0 < p"},
		{"p above 100", ms(1), 101, 0, "want 0 < p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Percentile(tc.ds, tc.p)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Percentile = %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Percentile = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       float64
		err        string
	}{
		{"utime plus stime", "27191 (cat) R 27147 27147 24244 0 -1 4194304 101 0 0 0 250 50 0 0 20 0 1 0 6908730", 3, ""},
		{"a command name with spaces and parentheses", "5 (a (b) c) S 1 1 1 0 -1 0 0 0 0 0 7 3 0 0", 0.1, ""},
		{"no command name", "27191 cat R 1", 0, "want"},
		{"too short", "1 (x) R 1 1 1", 0, "fields after the command name"},
		{"not a number", "5 (x) S 1 1 1 0 -1 0 0 0 0 0 many 3 0 0", 0, "utime/stime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StatCPU(tc.stat)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("StatCPU = %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("StatCPU = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestThisProcess(t *testing.T) {
	for i := 0; i < 3_000_000; i++ { // a little CPU to count
		_ = strings.Repeat("x", i%7)
	}
	if s, err := CPUSeconds(os.Getpid()); err != nil || s <= 0 {
		t.Errorf("CPUSeconds(self) = %v, %v; want a positive time", s, err)
	}
	rss, err := RSSMiB(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if peak, err := PeakRSSMiB(os.Getpid()); err != nil || peak < rss {
		t.Errorf("PeakRSSMiB(self) = %v, %v; want at least the current RSS %v", peak, err, rss)
	}
	if _, err := CPUSeconds(-1); err == nil {
		t.Error("CPUSeconds(-1) succeeded")
	}
}
