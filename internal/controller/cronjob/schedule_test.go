package cronjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
)

// TestScheduleEvents: schedules the parser refuses, unknown time zones and
// a TZ inside the schedule are reported with upstream's reasons and
// wording, and only a parsed schedule in a known zone starts Jobs.
func TestScheduleEvents(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mut      func(*batchv1.CronJob)
		events   []string
		startJob bool
	}{{
		name:   "unparseable schedule",
		mut:    func(cj *batchv1.CronJob) { cj.Spec.Schedule = "61 * * * *" },
		events: []string{`Warning UnparseableSchedule unparseable schedule: "61 * * * *" : end of range (61) above maximum (59): 61`},
	}, {
		name: "a parser panic is an error",
		mut:  func(cj *batchv1.CronJob) { cj.Spec.Schedule = "TZ=UTC"; cj.Spec.TimeZone = nil },
		events: []string{
			`Warning UnsupportedSchedule CRON_TZ or TZ used in schedule "TZ=UTC" is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details`,
			`Warning UnparseableSchedule unparseable schedule: "TZ=UTC" : invalid schedule format: runtime error: slice bounds out of range [:-1]`,
		},
	}, {
		name:   "unknown time zone",
		mut:    func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr("Mars/Olympus") },
		events: []string{`Warning UnknownTimeZone invalid timeZone: "Mars/Olympus": unknown time zone Mars/Olympus`},
	}, {
		name: "TZ in the schedule works but is warned about",
		mut: func(cj *batchv1.CronJob) {
			cj.Spec.Schedule = "CRON_TZ=Europe/Paris */5 * * * *"
			cj.Spec.TimeZone = nil
		},
		events:   []string{`Warning UnsupportedSchedule CRON_TZ or TZ used in schedule "CRON_TZ=Europe/Paris */5 * * * *" is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details`},
		startJob: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, makeCronJob(tc.mut))
			f.clock.Step(5 * time.Minute)
			f.sync(t, "default/backup")
			var events []string
			for _, e := range f.drainEvents() {
				if e[:7] == "Warning" {
					events = append(events, e)
				}
			}
			if diff := cmp.Diff(tc.events, events); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if got := len(f.jobNames(t)) == 1; got != tc.startJob {
				t.Errorf("started a job: %v, want %v", got, tc.startJob)
			}
		})
	}
}
