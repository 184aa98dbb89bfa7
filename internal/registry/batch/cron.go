package batch

import (
	"fmt"

	"github.com/robfig/cron/v3"
)

// ParseSchedule parses a CronJob schedule with the parser the API server's
// validation and the CronJob controller use: robfig/cron's standard parser
// (five fields with *, ?, lists, ranges, steps and month and weekday names;
// @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly;
// "@every <duration>"; an optional leading TZ= or CRON_TZ= location), so
// schedules and error messages are the ones Kubernetes gives. The parser
// panics on some malformed input; that becomes an error too, worded as
// upstream's ParseCronScheduleWithPanicRecovery words it. Without a location
// the schedule's Next works in the location of the time it is given.
func ParseSchedule(s string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("invalid schedule format: %v", r)
		}
	}()
	return cron.ParseStandard(s)
}
