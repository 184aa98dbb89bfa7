package job

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestAccountFinishedPods exercises compute's pod accounting step alone:
// what lands in uncountedTerminatedPods, which finalizers go, and when an
// interim status is written.
func TestAccountFinishedPods(t *testing.T) {
	indexed := func(j *batchv1.Job) {
		j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
		j.Spec.Completions, j.Spec.Parallelism = ptrTo[int32](3), ptrTo[int32](3)
	}
	deleting := func(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} }
	for _, tc := range []struct {
		name                string
		job                 func(*batchv1.Job)
		pods                []*v1.Pod
		succeeded, failed   []types.UID
		removed             []string // sorted
		interim             bool
		failJob, failedIdxs string
	}{{
		name:      "finished pods are recorded, running ones not",
		pods:      []*v1.Pod{makePod("ok", phase(v1.PodSucceeded)), makePod("bad", phase(v1.PodFailed)), makePod("run", phase(v1.PodRunning))},
		succeeded: []types.UID{"ok"}, failed: []types.UID{"bad"}, removed: []string{"bad", "ok"}, interim: true,
	}, {
		name: "already recorded pods only lose their finalizer",
		job: func(j *batchv1.Job) {
			j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"ok"}}
		},
		pods:    []*v1.Pod{makePod("ok", phase(v1.PodSucceeded))},
		removed: []string{"ok"}, succeeded: []types.UID{"ok"},
	}, {
		name:      "a second success of one index counts once",
		job:       indexed,
		pods:      []*v1.Pod{makePod("a", indexAnn("1", phase(v1.PodSucceeded))), makePod("b", indexAnn("1", phase(v1.PodSucceeded)))},
		succeeded: []types.UID{"a"}, removed: []string{"a", "b"}, interim: true,
	}, {
		name:    "a pod deleted while suspended is no failure",
		job:     func(j *batchv1.Job) { j.Spec.Suspend = ptrTo(true) },
		pods:    []*v1.Pod{makePod("gone", func(p *v1.Pod) { deleting(p); p.Status.Phase = v1.PodRunning })},
		removed: []string{"gone"},
	}, {
		name: "FailJob rule names the failure, Ignore rule drops the pod",
		job: func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{Action: batchv1.PodFailurePolicyActionIgnore, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{2}}},
				{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{3}}},
			}}
		},
		pods: []*v1.Pod{
			makePod("two", exitCode(2)),
			makePod("three", exitCode(3)),
		},
		failed: []types.UID{"three"}, removed: []string{"three", "two"}, interim: true,
		failJob: "Container c for pod ns/three failed with exit code 3 matching FailJob rule at index 1",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newSyncState(snapshot{job: makeJob("ns", "j", tc.job), pods: tc.pods, now: t0, manage: true})
			c.accountFinishedPods()
			got := []any{c.uncounted.Succeeded, c.uncounted.Failed, names(c.p.removeFinalizers), c.p.interim != nil, c.failJobMessage}
			want := []any{tc.succeeded, tc.failed, tc.removed, tc.interim, tc.failJob}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("succeeded, failed, finalizers removed, interim, FailJob message (-want +got):\n%s", diff)
			}
		})
	}
}

func exitCode(code int32) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Status.Phase = v1.PodFailed
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}}
	}
}

// TestJudgeOutcome: the first failure reason wins over completions, and a
// job already ending is not judged again.
func TestJudgeOutcome(t *testing.T) {
	for _, tc := range []struct {
		name   string
		job    func(*batchv1.Job)
		reason string
	}{
		{name: "backoff limit", job: func(j *batchv1.Job) {
			j.Spec.BackoffLimit = ptrTo[int32](0)
			j.Status.Failed = 1
			j.Status.Succeeded = 1
		}, reason: batchv1.JobReasonBackoffLimitExceeded},
		{name: "completions", job: func(j *batchv1.Job) { j.Status.Succeeded = 1 }, reason: batchv1.JobReasonCompletionsReached},
		{name: "nothing yet", job: nil},
		{name: "already ending", job: func(j *batchv1.Job) {
			j.Status.Succeeded = 1
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: v1.ConditionTrue, Reason: "Earlier"}}
		}, reason: "Earlier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newSyncState(snapshot{job: makeJob("ns", "j", tc.job), now: t0, manage: true})
			c.flushCounts()
			c.judgeOutcome()
			got := ""
			for _, cond := range c.st.Conditions {
				if cond.Type == batchv1.JobFailureTarget || cond.Type == batchv1.JobSuccessCriteriaMet {
					got = cond.Reason
				}
			}
			if got != tc.reason || c.ending != (tc.reason != "") {
				t.Errorf("reason %q, ending %v; want %q", got, c.ending, tc.reason)
			}
		})
	}
}
