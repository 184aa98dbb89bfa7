package cronjob

import (
	"fmt"
	"sort"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// scheduledTimestampAnnotation records on each Job the start time it was
// created for, in the CronJob's time zone, as upstream.
const scheduledTimestampAnnotation = "batch.kubernetes.io/cronjob-scheduled-timestamp"

// nextScheduleDelta is added to requeues so the sync lands just after the
// start time, never just before it.
const nextScheduleDelta = 100 * time.Millisecond

var controllerKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// snapshot is what one sync of a CronJob sees.
type snapshot struct {
	cj *batchv1.CronJob
	// jobs are the Jobs this CronJob controls.
	jobs []*batchv1.Job
	// gone are active references whose Job no longer exists.
	gone map[types.UID]bool
	// sched and loc are the parsed schedule and the CronJob's time zone.
	sched cron.Schedule
	loc   *time.Location
	now   time.Time
}

type event struct{ eventType, reason, message string }

// plan is the outcome of one sync, applied in order: deletes, create,
// status, events, requeue.
type plan struct {
	// create is the Job to start now, if any.
	create *batchv1.Job
	// replaced are active Jobs deleted under concurrencyPolicy Replace;
	// expired are finished Jobs beyond the history limits.
	replaced, expired []*batchv1.Job
	status            batchv1.CronJobStatus
	events            []event
	// requeue is the wait until the next start time.
	requeue time.Duration
}

// compute reconciles the active list with the Jobs, trims history, and
// decides whether the most recent due start time gets a Job under the
// concurrency policy, startingDeadlineSeconds and suspend. It does no I/O.
func compute(s snapshot) plan {
	cj := s.cj
	p := plan{status: *cj.Status.DeepCopy()}
	st := &p.status
	byUID := map[types.UID]*batchv1.Job{}
	for _, j := range s.jobs {
		byUID[j.UID] = j
	}
	var active []v1.ObjectReference
	inActive := map[types.UID]bool{}
	for _, ref := range st.Active {
		j, ok := byUID[ref.UID]
		switch {
		case s.gone[ref.UID]:
			p.events = append(p.events, event{v1.EventTypeNormal, "MissingJob", fmt.Sprintf("Active job went missing: %v", ref.Name)})
		case ok && finished(j) != "":
			p.events = append(p.events, event{v1.EventTypeNormal, "SawCompletedJob",
				fmt.Sprintf("Saw completed job: %s, condition: %v", j.Name, finished(j))})
		default:
			active = append(active, ref)
			inActive[ref.UID] = true
		}
	}
	for _, j := range s.jobs {
		if finished(j) == "" && !inActive[j.UID] {
			p.events = append(p.events, event{v1.EventTypeWarning, "UnexpectedJob",
				fmt.Sprintf("Saw a job that the controller did not create or forgot: %s", j.Name)})
		}
		if finished(j) == batchv1.JobComplete && j.Status.CompletionTime != nil &&
			(st.LastSuccessfulTime == nil || j.Status.CompletionTime.After(st.LastSuccessfulTime.Time)) {
			st.LastSuccessfulTime = j.Status.CompletionTime.DeepCopy()
		}
	}
	st.Active = active
	if cj.DeletionTimestamp != nil {
		return p
	}
	p.expired = expiredJobs(cj, s.jobs)
	if (cj.Spec.Suspend != nil && *cj.Spec.Suspend) || s.sched == nil {
		return p
	}

	now := s.now.In(s.loc)
	earliest := cj.CreationTimestamp.Time
	if st.LastScheduleTime != nil {
		earliest = st.LastScheduleTime.Time
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil {
		if e := now.Add(-time.Duration(*d) * time.Second); e.After(earliest) {
			earliest = e
		}
	}
	m := mostRecentStart(s.sched, earliest.In(s.loc), now)
	p.requeue = nextStart(s.sched, now, m.mostRecent, earliest.In(s.loc))
	if m.mostRecent.IsZero() {
		return p
	}
	if m.count > tooManyMissed {
		p.events = append(p.events, event{v1.EventTypeWarning, "TooManyMissedTimes",
			"too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"})
	}
	// Start times older than startingDeadlineSeconds were excluded above:
	// they are missed for good.
	scheduled := m.mostRecent
	name := jobName(cj, scheduled)
	for _, j := range s.jobs {
		if j.Name == name {
			// Already started (our status write may have been lost).
			st.LastScheduleTime = &metav1.Time{Time: scheduled}
			return p
		}
	}
	switch cj.Spec.ConcurrencyPolicy {
	case batchv1.ForbidConcurrent:
		if len(active) > 0 {
			p.events = append(p.events, event{v1.EventTypeNormal, "JobAlreadyActive",
				"Not starting job because prior execution is running and concurrency policy is Forbid"})
			return p
		}
	case batchv1.ReplaceConcurrent:
		for _, ref := range active {
			if j, ok := byUID[ref.UID]; ok {
				p.replaced = append(p.replaced, j)
			}
		}
		st.Active = nil
	}
	p.create = newJob(cj, scheduled, name)
	st.LastScheduleTime = &metav1.Time{Time: scheduled}
	return p
}

// nextStart is how long until the start time after the most recent one
// (or after earliest when none was due), plus a small delta.
func nextStart(sched cron.Schedule, now, mostRecent, earliest time.Time) time.Duration {
	from := mostRecent
	if from.IsZero() {
		from = earliest
	}
	next := sched.Next(from)
	if next.IsZero() {
		return 0
	}
	return max(next.Sub(now), 0) + nextScheduleDelta
}

// jobName is "<cronjob>-<start time in minutes since the epoch>", so each
// start time has exactly one Job.
func jobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}

// newJob builds the Job of one start time from the CronJob's template.
func newJob(cj *batchv1.CronJob, scheduled time.Time, name string) *batchv1.Job {
	tmpl := cj.Spec.JobTemplate.DeepCopy()
	ann := tmpl.Annotations
	if ann == nil {
		ann = map[string]string{}
	}
	ann[scheduledTimestampAnnotation] = scheduled.Format(time.RFC3339)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       cj.Namespace,
			Labels:          tmpl.Labels,
			Annotations:     ann,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, controllerKind)},
		},
		Spec: tmpl.Spec,
	}
}

// finished returns the Job's true Complete or Failed condition type, or "".
func finished(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == v1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

// expiredJobs returns the oldest finished Jobs beyond
// successfulJobsHistoryLimit and failedJobsHistoryLimit (unset limits keep
// everything), oldest first by start time.
func expiredJobs(cj *batchv1.CronJob, jobs []*batchv1.Job) []*batchv1.Job {
	var out []*batchv1.Job
	for _, c := range []struct {
		cond  batchv1.JobConditionType
		limit *int32
	}{{batchv1.JobComplete, cj.Spec.SuccessfulJobsHistoryLimit}, {batchv1.JobFailed, cj.Spec.FailedJobsHistoryLimit}} {
		if c.limit == nil {
			continue
		}
		var done []*batchv1.Job
		for _, j := range jobs {
			if finished(j) == c.cond && j.DeletionTimestamp == nil {
				done = append(done, j)
			}
		}
		sort.SliceStable(done, func(a, b int) bool { return olderStart(done[a], done[b]) })
		for i := 0; i < len(done)-int(*c.limit); i++ {
			out = append(out, done[i])
		}
	}
	return out
}

// olderStart orders Jobs by status.startTime (unstarted last), then name.
func olderStart(a, b *batchv1.Job) bool {
	switch {
	case a.Status.StartTime == nil && b.Status.StartTime == nil:
		return a.Name < b.Name
	case a.Status.StartTime == nil:
		return false
	case b.Status.StartTime == nil:
		return true
	case a.Status.StartTime.Equal(b.Status.StartTime):
		return a.Name < b.Name
	}
	return a.Status.StartTime.Before(b.Status.StartTime)
}
