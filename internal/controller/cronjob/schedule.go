package cronjob

import (
	"time"

	"github.com/robfig/cron/v3"
)

// tooManyMissed is how many missed start times earn a TooManyMissedTimes
// warning, as upstream.
const tooManyMissed = 100

// missed describes the start times due since the last one handled.
type missed struct {
	// mostRecent is the latest start time not after now; zero when none.
	mostRecent time.Time
	// count estimates how many start times were missed.
	count int64
}

// mostRecentStart finds the latest start time in (earliest, now] without
// enumerating them all: from the first two start times it estimates the
// interval and walks only the last stretch, so a CronJob stopped for years
// costs no more than one stopped for an hour. Schedules that never fire
// again report nothing.
func mostRecentStart(sched cron.Schedule, earliest, now time.Time) missed {
	t1 := sched.Next(earliest)
	if t1.IsZero() || t1.After(now) {
		return missed{}
	}
	t2 := sched.Next(t1)
	if t2.IsZero() || t2.After(now) {
		return missed{mostRecent: t1, count: 1}
	}
	interval := t2.Sub(t1)
	if interval <= 0 {
		return missed{mostRecent: t1, count: 1}
	}
	count := int64(now.Sub(t1)/interval) + 1
	// Walk only the last stretch, starting two estimated intervals early
	// and further back when an irregular schedule (weekdays only, hour
	// ranges) has no start time there.
	for back := 2 * interval; ; back *= 2 {
		cursor := t1.Add(time.Duration(count-1)*interval - back)
		if !cursor.After(t1) {
			cursor = t1
		}
		var last time.Time
		for t := sched.Next(cursor.Add(-time.Nanosecond)); !t.IsZero() && !t.After(now); t = sched.Next(t) {
			last = t
		}
		if !last.IsZero() {
			return missed{mostRecent: last, count: count}
		}
		if cursor.Equal(t1) {
			return missed{mostRecent: t1, count: count}
		}
	}
}
