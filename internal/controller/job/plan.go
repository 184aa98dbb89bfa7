package job

import (
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Re-creation backoff after failures: 10 s, doubling per failure since the
// last success, capped at six minutes.
const (
	backoffBase = 10 * time.Second
	backoffMax  = 6 * time.Minute
)

// maxPodCreateDeletePerSync bounds one sync's pod writes, as upstream.
const maxPodCreateDeletePerSync = 500

// Condition messages, in upstream's wording.
const (
	msgBackoffLimit     = "Job has reached the specified backoff limit"
	msgDeadline         = "Job was active longer than specified deadline"
	msgCompletions      = "Reached expected number of completions"
	msgMaxFailedIndexes = "Job has exceeded the specified maximal number of failed indexes"
	msgFailedIndexes    = "Job has failed indexes"
	msgSuspended        = "Job suspended"
	msgResumed          = "Job resumed"
	reasonJobSuspended  = "JobSuspended"
	reasonJobResumed    = "JobResumed"
	reasonEventComplete = "Completed"
)

// snapshot is what one sync of a Job sees.
type snapshot struct {
	job *batchv1.Job
	// pods are the job's own pods (after adoption), terminating ones
	// included.
	pods []*v1.Pod
	// pendingFinalizers are pods whose tracking finalizer this controller
	// removed but whose update the informer has not shown yet: they are
	// already counted.
	pendingFinalizers map[types.UID]bool
	now               time.Time
	// manage is false while earlier creates or deletes are still
	// unobserved: no pod is created or deleted then.
	manage bool
}

// event is one Event to record on the Job.
type event struct{ eventType, reason, message string }

// plan is the outcome of one sync, applied in order: interim status,
// finalizer removals, deletes, creates, final status, events, TTL deletion.
type plan struct {
	// interim, when not nil, records newly finished pods in
	// uncountedTerminatedPods before their finalizers go, so that a crash in
	// between never loses or doubles a count.
	interim *batchv1.JobStatus
	// removeFinalizers are finished pods whose tracking finalizer goes.
	removeFinalizers []*v1.Pod
	// creates holds one completion index per pod to create (noIndex for
	// NonIndexed jobs).
	creates []int
	deletes []*v1.Pod
	// indexFailures holds, with backoffLimitPerIndex, how many times each
	// index failed: the failure-count annotation of its next pod.
	indexFailures map[int]int
	// status is the status once every finalizer removal succeeded.
	status  batchv1.JobStatus
	events  []event
	requeue time.Duration
	// deleteJob is set when ttlSecondsAfterFinished has passed.
	deleteJob bool
}

// compute decides a Job's pod writes and status: exact counting through the
// tracking finalizer and uncountedTerminatedPods, the backoff limit, the
// active deadline, completions and parallelism, suspension, and the
// interim-then-terminal conditions of Kubernetes 1.31+ (FailureTarget before
// Failed, SuccessCriteriaMet before Complete, the terminal one only once no
// pod is left running or terminating). It does no I/O.
func compute(s snapshot) plan {
	job := s.job
	var p plan
	st := job.Status.DeepCopy()
	if isFinished(st) {
		p.removeFinalizers = withFinalizer(s)
		p.status = *st
		p.status.Active, p.status.Ready = 0, ptrTo[int32](0)
		p.status.Terminating = ptrTo(countTerminating(s.pods))
		ttl(&p, job, st, s.now)
		return p
	}
	completions := job.Spec.Completions
	indexed := isIndexed(job) && completions != nil
	ending := conditionTrue(st.Conditions, batchv1.JobFailureTarget) || conditionTrue(st.Conditions, batchv1.JobSuccessCriteriaMet)
	succeedingEnd := conditionTrue(st.Conditions, batchv1.JobSuccessCriteriaMet)
	suspended := job.Spec.Suspend != nil && *job.Spec.Suspend

	uncounted := st.UncountedTerminatedPods
	if uncounted == nil {
		uncounted = &batchv1.UncountedTerminatedPods{}
	}
	known := map[types.UID]bool{}
	for _, u := range append(append([]types.UID(nil), uncounted.Succeeded...), uncounted.Failed...) {
		known[u] = true
	}
	completed := map[int]bool{}
	if indexed {
		completed = parseIndexes(st.CompletedIndexes, *completions)
	}
	// With backoffLimitPerIndex, an index fails on its own once it failed
	// more than the limit (or a FailIndex rule matched).
	perIndex := indexed && job.Spec.BackoffLimitPerIndex != nil
	failedIndexes := map[int]bool{}
	if perIndex && st.FailedIndexes != nil {
		failedIndexes = parseIndexes(*st.FailedIndexes, *completions)
	}
	failJobMessage := ""
	newlyRecorded := false
	for _, pod := range s.pods {
		if !hasFinalizer(pod) || s.pendingFinalizers[pod.UID] {
			continue
		}
		succeeded := pod.Status.Phase == v1.PodSucceeded
		failed := !succeeded && (isFailed(pod, job) || (ending && pod.DeletionTimestamp != nil))
		if !succeeded && !failed {
			continue
		}
		p.removeFinalizers = append(p.removeFinalizers, pod)
		if known[pod.UID] {
			continue
		}
		switch {
		case succeeded:
			if indexed {
				ix := podIndex(pod, *completions)
				if ix == noIndex || completed[ix] {
					continue
				}
				completed[ix] = true
			}
			uncounted.Succeeded = append(uncounted.Succeeded, pod.UID)
		case (succeedingEnd || suspended) && pod.Status.Phase != v1.PodFailed:
			// Pods removed once the job met its success criteria, or
			// because it was suspended, are not failures.
			continue
		default:
			rule, msg := matchFailurePolicy(job.Spec.PodFailurePolicy, pod)
			if rule != nil && rule.Action == batchv1.PodFailurePolicyActionIgnore {
				continue
			}
			if rule != nil && rule.Action == batchv1.PodFailurePolicyActionFailJob && failJobMessage == "" {
				failJobMessage = msg
			}
			if perIndex {
				ix := podIndex(pod, *completions)
				failIndex := rule != nil && rule.Action == batchv1.PodFailurePolicyActionFailIndex
				if ix != noIndex && !completed[ix] && (failIndex || indexFailureCount(pod)+1 > int(*job.Spec.BackoffLimitPerIndex)) {
					failedIndexes[ix] = true
				}
			}
			uncounted.Failed = append(uncounted.Failed, pod.UID)
		}
		known[pod.UID] = true
		newlyRecorded = true
	}
	if newlyRecorded {
		interim := st.DeepCopy()
		interim.UncountedTerminatedPods = uncounted.DeepCopy()
		if indexed {
			interim.CompletedIndexes = formatIndexes(completed)
		}
		if perIndex {
			interim.FailedIndexes = ptrTo(formatIndexes(failedIndexes))
		}
		p.interim = interim
	}

	// Flush: every uncounted pod has lost (or is losing now) its finalizer.
	if indexed {
		st.CompletedIndexes = formatIndexes(completed)
		st.Succeeded = int32(len(completed))
		if perIndex {
			st.FailedIndexes = ptrTo(formatIndexes(failedIndexes))
		}
	} else {
		st.Succeeded += int32(len(uncounted.Succeeded))
	}
	st.Failed += int32(len(uncounted.Failed))
	st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}

	var active []*v1.Pod
	for _, pod := range s.pods {
		if isActive(pod) {
			active = append(active, pod)
		}
	}
	terminating := countTerminating(s.pods)

	if !ending {
		switch {
		case failJobMessage != "":
			setCondition(st, batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, failJobMessage, s.now)
		case job.Spec.BackoffLimit != nil && st.Failed > *job.Spec.BackoffLimit:
			setCondition(st, batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, msgBackoffLimit, s.now)
		case !suspended && deadlineLeft(job, st, s.now) == 0:
			setCondition(st, batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, msgDeadline, s.now)
		case perIndex && job.Spec.MaxFailedIndexes != nil && int32(len(failedIndexes)) > *job.Spec.MaxFailedIndexes:
			setCondition(st, batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, msgMaxFailedIndexes, s.now)
		case perIndex && len(failedIndexes) > 0 && len(completed)+len(failedIndexes) >= int(*completions):
			setCondition(st, batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, msgFailedIndexes, s.now)
		case completionsReached(job, st, completed, len(active)):
			setCondition(st, batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, msgCompletions, s.now)
		}
		ending = conditionTrue(st.Conditions, batchv1.JobFailureTarget) || conditionTrue(st.Conditions, batchv1.JobSuccessCriteriaMet)
	}

	switch {
	case ending:
		p.deletes = active
		if len(active) == 0 && terminating == 0 {
			finish(&p, st, s.now)
		}
	case suspended:
		p.deletes = active
		if !conditionTrue(st.Conditions, batchv1.JobSuspended) {
			setConditionStatus(st, batchv1.JobSuspended, v1.ConditionTrue, reasonJobSuspended, msgSuspended, s.now)
			p.events = append(p.events, event{v1.EventTypeNormal, "Suspended", msgSuspended})
		}
	default:
		if conditionTrue(st.Conditions, batchv1.JobSuspended) {
			setConditionStatus(st, batchv1.JobSuspended, v1.ConditionFalse, reasonJobResumed, msgResumed, s.now)
			p.events = append(p.events, event{v1.EventTypeNormal, "Resumed", msgResumed})
			// The active deadline counts from the resumption.
			st.StartTime = &metav1.Time{Time: s.now}
		}
		if st.StartTime == nil {
			st.StartTime = &metav1.Time{Time: s.now}
		}
		wait := backoffLeft(s.pods, job, s.now)
		if indexed {
			done := map[int]bool{}
			for ix := range completed {
				done[ix] = true
			}
			for ix := range failedIndexes {
				done[ix] = true
			}
			blocked := func(int) bool { return wait > 0 }
			if perIndex {
				var indexWait map[int]time.Duration
				indexWait, p.indexFailures = indexBackoffs(s.pods, job, *completions, s.now)
				wait = 0
				for ix, d := range indexWait {
					if !done[ix] {
						wait = minPositive(wait, d)
					}
				}
				blocked = func(ix int) bool { return indexWait[ix] > 0 }
			}
			p.creates, p.deletes = manageIndexed(job, active, done, blocked)
		} else {
			p.creates, p.deletes = manageNonIndexed(job, st, active, wait > 0)
		}
		p.requeue = minPositive(wait, deadlineLeft(job, st, s.now))
	}
	if !s.manage {
		p.creates, p.deletes = nil, nil
	}
	deleted := map[types.UID]bool{}
	for _, pod := range p.deletes {
		deleted[pod.UID] = true
	}
	var ready int32
	for _, pod := range active {
		if !deleted[pod.UID] && podReady(pod) {
			ready++
		}
	}
	st.Active = int32(len(active) - len(p.deletes) + len(p.creates))
	st.Ready = &ready
	st.Terminating = ptrTo(terminating + int32(len(p.deletes)))
	p.status = *st
	if isFinished(st) {
		ttl(&p, job, st, s.now)
	}
	return p
}

// finish turns the interim condition into the terminal one.
func finish(p *plan, st *batchv1.JobStatus, now time.Time) {
	if c := findCondition(st.Conditions, batchv1.JobFailureTarget); c != nil {
		setCondition(st, batchv1.JobFailed, c.Reason, c.Message, now)
		p.events = append(p.events, event{v1.EventTypeWarning, c.Reason, c.Message})
		return
	}
	c := findCondition(st.Conditions, batchv1.JobSuccessCriteriaMet)
	setCondition(st, batchv1.JobComplete, c.Reason, c.Message, now)
	st.CompletionTime = &metav1.Time{Time: now}
	p.events = append(p.events, event{v1.EventTypeNormal, reasonEventComplete, "Job completed"})
}

// ttl deletes a finished job once ttlSecondsAfterFinished passed, or
// requeues it for that moment.
func ttl(p *plan, job *batchv1.Job, st *batchv1.JobStatus, now time.Time) {
	if job.Spec.TTLSecondsAfterFinished == nil || job.DeletionTimestamp != nil {
		return
	}
	var at time.Time
	for _, c := range st.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == v1.ConditionTrue {
			at = c.LastTransitionTime.Time
		}
	}
	expire := at.Add(time.Duration(*job.Spec.TTLSecondsAfterFinished) * time.Second)
	if !now.Before(expire) {
		p.deleteJob = true
		return
	}
	p.requeue = minPositive(p.requeue, expire.Sub(now))
}

// withFinalizer lists the pods of a finished job that still carry the
// tracking finalizer: the job counts nothing more, so all of them lose it.
func withFinalizer(s snapshot) []*v1.Pod {
	var out []*v1.Pod
	for _, pod := range s.pods {
		if hasFinalizer(pod) && !s.pendingFinalizers[pod.UID] {
			out = append(out, pod)
		}
	}
	return out
}

// manageNonIndexed keeps min(parallelism, completions - succeeded) pods
// active; a job without completions stops creating once one pod succeeded.
func manageNonIndexed(job *batchv1.Job, st *batchv1.JobStatus, active []*v1.Pod, inBackoff bool) (creates []int, deletes []*v1.Pod) {
	want := int32(1)
	if job.Spec.Parallelism != nil {
		want = *job.Spec.Parallelism
	}
	switch {
	case job.Spec.Completions != nil:
		want = min(want, max(*job.Spec.Completions-st.Succeeded, 0))
	case st.Succeeded > 0:
		want = 0
	}
	have := int32(len(active))
	if have > want {
		sorted := append([]*v1.Pod(nil), active...)
		sortForDeletion(sorted)
		return nil, sorted[:min(have-want, maxPodCreateDeletePerSync)]
	}
	if have < want && !inBackoff {
		for range min(want-have, maxPodCreateDeletePerSync) {
			creates = append(creates, noIndex)
		}
	}
	return creates, nil
}

// manageIndexed keeps one active pod for each index not yet completed (or
// failed), the lowest first, at most parallelism at a time, skipping
// indexes in backoff; pods with an invalid, finished or duplicated index
// go.
func manageIndexed(job *batchv1.Job, active []*v1.Pod, completed map[int]bool, blocked func(int) bool) (creates []int, deletes []*v1.Pod) {
	completions := *job.Spec.Completions
	parallelism := int32(1)
	if job.Spec.Parallelism != nil {
		parallelism = *job.Spec.Parallelism
	}
	byIndex := map[int][]*v1.Pod{}
	for _, pod := range active {
		ix := podIndex(pod, completions)
		if ix == noIndex || completed[ix] {
			deletes = append(deletes, pod)
			continue
		}
		byIndex[ix] = append(byIndex[ix], pod)
	}
	kept := 0
	for _, pods := range byIndex {
		sortForDeletion(pods)
		deletes = append(deletes, pods[:len(pods)-1]...)
		kept++
	}
	room := min(int(parallelism)-kept, maxPodCreateDeletePerSync)
	for ix := 0; ix < int(completions) && len(creates) < room; ix++ {
		if !completed[ix] && len(byIndex[ix]) == 0 && !blocked(ix) {
			creates = append(creates, ix)
		}
	}
	return creates, deletes
}

// sortForDeletion orders pods most expendable first: not yet scheduled,
// not ready, then the youngest.
func sortForDeletion(pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			return a.Spec.NodeName == ""
		}
		if podReady(a) != podReady(b) {
			return !podReady(a)
		}
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	})
}

func completionsReached(job *batchv1.Job, st *batchv1.JobStatus, completed map[int]bool, active int) bool {
	c := job.Spec.Completions
	switch {
	case c == nil:
		return st.Succeeded > 0 && active == 0
	case isIndexed(job):
		return int32(len(completed)) >= *c
	default:
		return st.Succeeded >= *c
	}
}

// backoffLeft is how long new pods must still wait after the failures since
// the last success: 10 s doubling per failure, capped at six minutes, from
// the latest failure's finish.
func backoffLeft(pods []*v1.Pod, job *batchv1.Job, now time.Time) time.Duration {
	var lastSuccess time.Time
	for _, pod := range pods {
		if pod.Status.Phase == v1.PodSucceeded {
			if t := finishTime(pod); t.After(lastSuccess) {
				lastSuccess = t
			}
		}
	}
	failures := 0
	var lastFailure time.Time
	for _, pod := range pods {
		if pod.Status.Phase != v1.PodFailed {
			continue
		}
		if rule, _ := matchFailurePolicy(job.Spec.PodFailurePolicy, pod); rule != nil && rule.Action == batchv1.PodFailurePolicyActionIgnore {
			continue
		}
		t := finishTime(pod)
		if t.Before(lastSuccess) {
			continue
		}
		failures++
		if t.After(lastFailure) {
			lastFailure = t
		}
	}
	if failures == 0 {
		return 0
	}
	delay := backoffMax
	if failures <= 10 {
		delay = min(backoffBase<<(failures-1), backoffMax)
	}
	return max(lastFailure.Add(delay).Sub(now), 0)
}

// deadlineLeft is the time until activeDeadlineSeconds passes: -1 without
// a deadline (or before the job started), 0 once it passed.
func deadlineLeft(job *batchv1.Job, st *batchv1.JobStatus, now time.Time) time.Duration {
	if job.Spec.ActiveDeadlineSeconds == nil || st.StartTime == nil {
		return -1
	}
	end := st.StartTime.Add(time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second)
	return max(end.Sub(now), 0)
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

func countTerminating(pods []*v1.Pod) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil && !isTerminal(pod) {
			n++
		}
	}
	return n
}

func isIndexed(job *batchv1.Job) bool {
	return job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
}

// isFinished reports a true Complete or Failed condition.
func isFinished(st *batchv1.JobStatus) bool {
	return conditionTrue(st.Conditions, batchv1.JobComplete) || conditionTrue(st.Conditions, batchv1.JobFailed)
}

func conditionTrue(conds []batchv1.JobCondition, t batchv1.JobConditionType) bool {
	c := findCondition(conds, t)
	return c != nil && c.Status == v1.ConditionTrue
}

func findCondition(conds []batchv1.JobCondition, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func setCondition(st *batchv1.JobStatus, t batchv1.JobConditionType, reason, message string, now time.Time) {
	setConditionStatus(st, t, v1.ConditionTrue, reason, message, now)
}

// setConditionStatus sets a condition, moving lastTransitionTime only when
// the status changes.
func setConditionStatus(st *batchv1.JobStatus, t batchv1.JobConditionType, status v1.ConditionStatus, reason, message string, now time.Time) {
	ts := metav1.NewTime(now)
	if c := findCondition(st.Conditions, t); c != nil {
		if c.Status != status {
			c.LastTransitionTime = ts
		}
		c.Status, c.Reason, c.Message, c.LastProbeTime = status, reason, message, ts
		return
	}
	st.Conditions = append(st.Conditions, batchv1.JobCondition{
		Type: t, Status: status, Reason: reason, Message: message, LastProbeTime: ts, LastTransitionTime: ts,
	})
}

func ptrTo[T any](v T) *T { return &v }

// indexBackoffs returns, per index of a backoffLimitPerIndex job, the
// re-creation backoff left after its failures and how many times it failed
// (the highest failure count of its failed pods, plus one).
func indexBackoffs(pods []*v1.Pod, job *batchv1.Job, completions int32, now time.Time) (map[int]time.Duration, map[int]int) {
	byIndex := map[int][]*v1.Pod{}
	failures := map[int]int{}
	for _, pod := range pods {
		ix := podIndex(pod, completions)
		if ix == noIndex || pod.Status.Phase != v1.PodFailed {
			continue
		}
		if rule, _ := matchFailurePolicy(job.Spec.PodFailurePolicy, pod); rule != nil && rule.Action == batchv1.PodFailurePolicyActionIgnore {
			continue
		}
		byIndex[ix] = append(byIndex[ix], pod)
		failures[ix] = max(failures[ix], indexFailureCount(pod)+1)
	}
	wait := map[int]time.Duration{}
	for ix, failed := range byIndex {
		wait[ix] = backoffLeft(failed, job, now)
	}
	return wait, failures
}
