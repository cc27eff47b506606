package faults_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// tally counts the faults a test injected, what the interrupted operation
// did, and the time from each fault to convergence, for the closing
// table of issue 17 (logged at the end of the test).
type tally struct {
	mu       sync.Mutex
	outcomes map[string]map[string]int
	recovery map[string][]time.Duration
}

func newTally(t *testing.T) *tally {
	ty := &tally{outcomes: map[string]map[string]int{}, recovery: map[string][]time.Duration{}}
	t.Cleanup(func() { t.Log(ty.String()) })
	return ty
}

func (ty *tally) add(fault, outcome string, recovery time.Duration) {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	if ty.outcomes[fault] == nil {
		ty.outcomes[fault] = map[string]int{}
	}
	ty.outcomes[fault][outcome]++
	ty.recovery[fault] = append(ty.recovery[fault], recovery)
}

// String is one line per fault: times injected, the interrupted
// operation's outcomes, and min / median / max of the recovery times.
func (ty *tally) String() string {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	var b strings.Builder
	b.WriteString("faults injected:")
	faults := make([]string, 0, len(ty.outcomes))
	for f := range ty.outcomes {
		faults = append(faults, f)
	}
	sort.Strings(faults)
	for _, f := range faults {
		d := slices.Clone(ty.recovery[f])
		slices.Sort(d)
		var outs []string
		for o, n := range ty.outcomes[f] {
			outs = append(outs, fmt.Sprintf("%s ×%d", o, n))
		}
		sort.Strings(outs)
		r := func(x time.Duration) string { return x.Round(100 * time.Millisecond).String() }
		fmt.Fprintf(&b, "\n  %-40s ×%-3d recovery min %s median %s max %s; interrupted: %s",
			f, len(d), r(d[0]), r(d[len(d)/2]), r(d[len(d)-1]), strings.Join(outs, ", "))
	}
	return b.String()
}
