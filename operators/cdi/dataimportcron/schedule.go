package dataimportcron

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// NextTime gives the first time after now that schedule (a standard cron
// expression or descriptor, robfig/cron's ParseStandard as CDI's
// setNextCronTime) fires. It fails on an expression that does not parse.
func NextTime(schedule string, now time.Time) (time.Time, error) {
	s, err := cron.ParseStandard(schedule)
	if err != nil {
		return time.Time{}, fmt.Errorf("spec.schedule %q: %w", schedule, err)
	}
	return s.Next(now), nil
}

// pollDue reports whether a cron whose nextCronTime annotation is next
// (RFC 3339; empty: never polled) should be polled at now. It fails on
// an annotation that does not parse.
func pollDue(next string, now time.Time) (bool, error) {
	if next == "" {
		return true, nil
	}
	t, err := time.Parse(time.RFC3339, next)
	if err != nil {
		return false, fmt.Errorf("annotation %s %q: %w", AnnNextCronTime, next, err)
	}
	return !t.After(now), nil
}
