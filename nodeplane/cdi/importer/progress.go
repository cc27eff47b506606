package importer

import (
	"fmt"
	"sync"
	"time"
)

// formatPercent formats like CDI's status.progress: two decimals and "%".
func formatPercent(p float64) string { return fmt.Sprintf("%.2f%%", p) }

// reporter throttles progress reports and keeps Percent monotonic.
type reporter struct {
	mu       sync.Mutex
	fn       func(Progress)
	interval time.Duration
	last     time.Time
	cur      Progress
}

func newReporter(fn func(Progress), interval time.Duration) *reporter {
	return &reporter{fn: fn, interval: interval}
}

// update records bytes/total/percent and reports if the interval elapsed or
// force is set. A percent lower than the last one is raised to it.
func (r *reporter) update(bytes, total int64, percent float64, force bool) {
	if r == nil || r.fn == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if percent < r.cur.Percent {
		percent = r.cur.Percent
	}
	if percent > 100 {
		percent = 100
	}
	r.cur = Progress{Bytes: bytes, Total: total, Percent: percent}
	now := time.Now()
	if !force && now.Sub(r.last) < r.interval {
		return
	}
	r.last = now
	r.fn(r.cur)
}

// percent gives the last recorded percentage.
func (r *reporter) percent() float64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur.Percent
}
