package dataimportcron

import (
	"testing"
	"time"
)

// TestNextTime: standard five-field expressions and descriptors, as CDI's
// cronexpr.ParseStandard; six fields and garbage are refused.
func TestNextTime(t *testing.T) {
	now := time.Date(2026, 11, 28, 3, 17, 42, 500, time.UTC)
	for _, tc := range []struct {
		schedule string
		want     time.Time
		err      bool
	}{
		{"0 */12 * * *", time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), false},
		{"30 3 * * *", time.Date(2026, 11, 28, 3, 30, 0, 0, time.UTC), false},
		{"@daily", time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), false},
		{"@every 1s", time.Date(2026, 11, 28, 3, 17, 43, 0, time.UTC), false},
		{"@every 10m", time.Date(2026, 11, 28, 3, 27, 42, 0, time.UTC), false},
		{"0 0 */12 * * *", time.Time{}, true},
		{"weekly", time.Time{}, true},
	} {
		got, err := NextTime(tc.schedule, now)
		if (err != nil) != tc.err || !got.Equal(tc.want) {
			t.Errorf("NextTime(%q) = %v, %v; want %v (error %v)", tc.schedule, got, err, tc.want, tc.err)
		}
	}
}

// TestPollDue: never polled or past the next time is due; a garbled
// annotation is an error.
func TestPollDue(t *testing.T) {
	now := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		next     string
		due, err bool
	}{
		{"", true, false},
		{"2026-11-28T02:59:59Z", true, false},
		{"2026-11-28T03:00:00Z", true, false},
		{"2026-11-28T03:00:01Z", false, false},
		{"tomorrow", false, true},
	} {
		due, err := pollDue(tc.next, now)
		if due != tc.due || (err != nil) != tc.err {
			t.Errorf("pollDue(%q) = %v, %v; want %v (error %v)", tc.next, due, err, tc.due, tc.err)
		}
	}
}
