package measure

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p ≤ 100) of ds in
// milliseconds by the nearest-rank method: the smallest value at least p
// percent of ds are at or below (p 50 of an even count is the lower
// middle one; p 100 is the maximum). ds is sorted in place. It fails for
// no durations or p outside (0, 100].
func Percentile(ds []time.Duration, p float64) (float64, error) {
	if len(ds) == 0 {
		return math.NaN(), fmt.Errorf("percentile %v of no durations", p)
	}
	if !(p > 0 && p <= 100) {
		return math.NaN(), fmt.Errorf("percentile %v: want 0 < p ≤ 100", p)
	}
	slices.Sort(ds)
	rank := int(math.Ceil(p / 100 * float64(len(ds))))
	return float64(ds[rank-1]) / float64(time.Millisecond), nil
}
