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
// pod is left running or terminating). It does no I/O. Its steps run in
// this order, each reading what the earlier ones decided.
func compute(s snapshot) plan {
	if isFinished(&s.job.Status) {
		return computeFinished(s)
	}
	c := newSyncState(s)
	c.accountFinishedPods()
	c.flushCounts()
	c.collectActive()
	c.judgeOutcome()
	c.planPods()
	c.finalStatus()
	return c.p
}

// computeFinished is the plan of a Job already Complete or Failed: its
// pods lose the tracking finalizer, nothing is active, and the TTL runs.
func computeFinished(s snapshot) plan {
	var p plan
	st := s.job.Status.DeepCopy()
	p.removeFinalizers = withFinalizer(s)
	p.status = *st
	p.status.Active, p.status.Ready = 0, ptrTo[int32](0)
	p.status.Terminating = ptrTo(countTerminating(s.pods))
	ttl(&p, s.job, st, s.now)
	return p
}

// syncState is what compute's steps share while deciding one sync.
type syncState struct {
	s   snapshot
	job *batchv1.Job
	// st is the status being built; p the plan.
	st *batchv1.JobStatus
	p  plan

	completions *int32
	// indexed is an Indexed job with completions; perIndex one that
	// also has backoffLimitPerIndex, where an index fails on its own once
	// it failed more than the limit (or a FailIndex rule matched).
	indexed, perIndex bool
	suspended         bool
	// ending is true once a FailureTarget or SuccessCriteriaMet condition
	// holds; succeedingEnd once SuccessCriteriaMet held at the start.
	ending, succeedingEnd bool

	uncounted *batchv1.UncountedTerminatedPods
	// known are the pods already recorded as uncounted.
	known                    map[types.UID]bool
	completed, failedIndexes map[int]bool
	// failJobMessage is the message of the first FailJob rule matched.
	failJobMessage string

	active      []*v1.Pod
	terminating int32
}

func newSyncState(s snapshot) *syncState {
	job := s.job
	st := job.Status.DeepCopy()
	c := &syncState{
		s: s, job: job, st: st,
		completions:   job.Spec.Completions,
		ending:        conditionTrue(st.Conditions, batchv1.JobFailureTarget) || conditionTrue(st.Conditions, batchv1.JobSuccessCriteriaMet),
		succeedingEnd: conditionTrue(st.Conditions, batchv1.JobSuccessCriteriaMet),
		suspended:     job.Spec.Suspend != nil && *job.Spec.Suspend,
		uncounted:     st.UncountedTerminatedPods,
		known:         map[types.UID]bool{},
		completed:     map[int]bool{},
		failedIndexes: map[int]bool{},
	}
	c.indexed = isIndexed(job) && c.completions != nil
	c.perIndex = c.indexed && job.Spec.BackoffLimitPerIndex != nil
	if c.uncounted == nil {
		c.uncounted = &batchv1.UncountedTerminatedPods{}
	}
	for _, u := range append(append([]types.UID(nil), c.uncounted.Succeeded...), c.uncounted.Failed...) {
		c.known[u] = true
	}
	if c.indexed {
		c.completed = parseIndexes(st.CompletedIndexes, *c.completions)
	}
	if c.perIndex && st.FailedIndexes != nil {
		c.failedIndexes = parseIndexes(*st.FailedIndexes, *c.completions)
	}
	return c
}

// accountFinishedPods records every newly finished pod that still carries
// the tracking finalizer in uncountedTerminatedPods (the interim status,
// written before any finalizer goes) and marks its finalizer for removal.
func (c *syncState) accountFinishedPods() {
	newlyRecorded := false
	for _, pod := range c.s.pods {
		if !hasFinalizer(pod) || c.s.pendingFinalizers[pod.UID] {
			continue
		}
		succeeded := pod.Status.Phase == v1.PodSucceeded
		failed := !succeeded && (isFailed(pod, c.job) || (c.ending && pod.DeletionTimestamp != nil))
		if !succeeded && !failed {
			continue
		}
		c.p.removeFinalizers = append(c.p.removeFinalizers, pod)
		if c.known[pod.UID] {
			continue
		}
		var recorded bool
		if succeeded {
			recorded = c.recordSuccess(pod)
		} else {
			recorded = c.recordFailure(pod)
		}
		if recorded {
			c.known[pod.UID] = true
			newlyRecorded = true
		}
	}
	if newlyRecorded {
		interim := c.st.DeepCopy()
		interim.UncountedTerminatedPods = c.uncounted.DeepCopy()
		if c.indexed {
			interim.CompletedIndexes = formatIndexes(c.completed)
		}
		if c.perIndex {
			interim.FailedIndexes = ptrTo(formatIndexes(c.failedIndexes))
		}
		c.p.interim = interim
	}
}

// recordSuccess counts a succeeded pod, once per index for Indexed jobs;
// it reports whether the pod was recorded.
func (c *syncState) recordSuccess(pod *v1.Pod) bool {
	if c.indexed {
		ix := podIndex(pod, *c.completions)
		if ix == noIndex || c.completed[ix] {
			return false
		}
		c.completed[ix] = true
	}
	c.uncounted.Succeeded = append(c.uncounted.Succeeded, pod.UID)
	return true
}

// recordFailure applies the pod failure policy to a failed pod and counts
// it unless a rule ignores it; it reports whether the pod was recorded.
// Pods removed once the job met its success criteria, or because it was
// suspended, are not failures.
func (c *syncState) recordFailure(pod *v1.Pod) bool {
	if (c.succeedingEnd || c.suspended) && pod.Status.Phase != v1.PodFailed {
		return false
	}
	rule, msg := matchFailurePolicy(c.job.Spec.PodFailurePolicy, pod)
	if rule != nil && rule.Action == batchv1.PodFailurePolicyActionIgnore {
		return false
	}
	if rule != nil && rule.Action == batchv1.PodFailurePolicyActionFailJob && c.failJobMessage == "" {
		c.failJobMessage = msg
	}
	if c.perIndex {
		ix := podIndex(pod, *c.completions)
		failIndex := rule != nil && rule.Action == batchv1.PodFailurePolicyActionFailIndex
		if ix != noIndex && !c.completed[ix] && (failIndex || indexFailureCount(pod)+1 > int(*c.job.Spec.BackoffLimitPerIndex)) {
			c.failedIndexes[ix] = true
		}
	}
	c.uncounted.Failed = append(c.uncounted.Failed, pod.UID)
	return true
}

// flushCounts moves the uncounted pods into succeeded, failed and the
// index lists: every one of them has lost (or is losing now) its finalizer.
func (c *syncState) flushCounts() {
	st := c.st
	if c.indexed {
		st.CompletedIndexes = formatIndexes(c.completed)
		st.Succeeded = int32(len(c.completed))
		if c.perIndex {
			st.FailedIndexes = ptrTo(formatIndexes(c.failedIndexes))
		}
	} else {
		st.Succeeded += int32(len(c.uncounted.Succeeded))
	}
	st.Failed += int32(len(c.uncounted.Failed))
	st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
}

// collectActive finds the running pods and counts the terminating ones.
func (c *syncState) collectActive() {
	for _, pod := range c.s.pods {
		if isActive(pod) {
			c.active = append(c.active, pod)
		}
	}
	c.terminating = countTerminating(c.s.pods)
}

// judgeOutcome sets the interim condition the first time the job fails
// (a FailJob rule, the backoff limit, the active deadline, failed indexes)
// or meets its successPolicy or its completions.
func (c *syncState) judgeOutcome() {
	if c.ending {
		return
	}
	job, st, now := c.job, c.st, c.s.now
	switch {
	case c.failJobMessage != "":
		setCondition(st, batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, c.failJobMessage, now)
	case job.Spec.BackoffLimit != nil && st.Failed > *job.Spec.BackoffLimit:
		setCondition(st, batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, msgBackoffLimit, now)
	case !c.suspended && deadlineLeft(job, st, now) == 0:
		setCondition(st, batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, msgDeadline, now)
	case c.perIndex && job.Spec.MaxFailedIndexes != nil && int32(len(c.failedIndexes)) > *job.Spec.MaxFailedIndexes:
		setCondition(st, batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, msgMaxFailedIndexes, now)
	case c.perIndex && len(c.failedIndexes) > 0 && len(c.completed)+len(c.failedIndexes) >= int(*c.completions):
		setCondition(st, batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, msgFailedIndexes, now)
	default:
		if msg, met := c.successPolicyMet(); met {
			setCondition(st, batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, msg, now)
		} else if completionsReached(job, st, c.completed, len(c.active)) {
			setCondition(st, batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, msgCompletions, now)
		}
	}
	c.ending = conditionTrue(st.Conditions, batchv1.JobFailureTarget) || conditionTrue(st.Conditions, batchv1.JobSuccessCriteriaMet)
}

// successPolicyMet evaluates an Indexed job's successPolicy after the
// failure checks and before completions, as upstream does: a job whose
// policy is met when its last index succeeds completes by SuccessPolicy.
func (c *syncState) successPolicyMet() (string, bool) {
	if !c.indexed {
		return "", false
	}
	return matchSuccessPolicy(c.job.Spec.SuccessPolicy, *c.completions, c.completed)
}

// planPods decides the pod creates and deletes: an ending job deletes its
// active pods and finishes once none is left; a suspended one deletes them
// too; a running one keeps parallelism, honouring the failure backoff.
// Nothing is created or deleted while earlier writes are unobserved.
func (c *syncState) planPods() {
	st, now := c.st, c.s.now
	switch {
	case c.ending:
		c.p.deletes = c.active
		if len(c.active) == 0 && c.terminating == 0 {
			finish(&c.p, st, now)
		}
	case c.suspended:
		c.p.deletes = c.active
		if !conditionTrue(st.Conditions, batchv1.JobSuspended) {
			setConditionStatus(st, batchv1.JobSuspended, v1.ConditionTrue, reasonJobSuspended, msgSuspended, now)
			c.p.events = append(c.p.events, event{v1.EventTypeNormal, "Suspended", msgSuspended})
		}
	default:
		if conditionTrue(st.Conditions, batchv1.JobSuspended) {
			setConditionStatus(st, batchv1.JobSuspended, v1.ConditionFalse, reasonJobResumed, msgResumed, now)
			c.p.events = append(c.p.events, event{v1.EventTypeNormal, "Resumed", msgResumed})
			// The active deadline counts from the resumption.
			st.StartTime = &metav1.Time{Time: now}
		}
		if st.StartTime == nil {
			st.StartTime = &metav1.Time{Time: now}
		}
		wait := c.planRunning()
		c.p.requeue = minPositive(wait, deadlineLeft(c.job, st, now))
	}
	if !c.s.manage {
		c.p.creates, c.p.deletes = nil, nil
	}
}

// planRunning is the creation plan of a running job: which pods (indexes)
// to create and which to delete, and the backoff wait left before the
// next creation.
func (c *syncState) planRunning() time.Duration {
	job, now := c.job, c.s.now
	wait := backoffLeft(c.s.pods, job, now)
	if !c.indexed {
		c.p.creates, c.p.deletes = manageNonIndexed(job, c.st, c.active, wait > 0)
		return wait
	}
	done := map[int]bool{}
	for ix := range c.completed {
		done[ix] = true
	}
	for ix := range c.failedIndexes {
		done[ix] = true
	}
	blocked := func(int) bool { return wait > 0 }
	if c.perIndex {
		var indexWait map[int]time.Duration
		indexWait, c.p.indexFailures = indexBackoffs(c.s.pods, job, *c.completions, now)
		wait = 0
		for ix, d := range indexWait {
			if !done[ix] {
				wait = minPositive(wait, d)
			}
		}
		blocked = func(ix int) bool { return indexWait[ix] > 0 }
	}
	c.p.creates, c.p.deletes = manageIndexed(job, c.active, done, blocked)
	return wait
}

// finalStatus counts active, ready and terminating pods as they will be
// once the plan is applied, and runs the TTL of a job that just finished.
func (c *syncState) finalStatus() {
	st := c.st
	deleted := map[types.UID]bool{}
	for _, pod := range c.p.deletes {
		deleted[pod.UID] = true
	}
	var ready int32
	for _, pod := range c.active {
		if !deleted[pod.UID] && podReady(pod) {
			ready++
		}
	}
	st.Active = int32(len(c.active) - len(c.p.deletes) + len(c.p.creates))
	st.Ready = &ready
	st.Terminating = ptrTo(c.terminating + int32(len(c.p.deletes)))
	c.p.status = *st
	if isFinished(st) {
		ttl(&c.p, c.job, st, c.s.now)
	}
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
