package job

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
)

func TestMatchSuccessPolicy(t *testing.T) {
	rule := func(indexes string, count int32) batchv1.SuccessPolicyRule {
		var r batchv1.SuccessPolicyRule
		if indexes != "" {
			r.SucceededIndexes = &indexes
		}
		if count > 0 {
			r.SucceededCount = &count
		}
		return r
	}
	for _, tc := range []struct {
		name      string
		rules     []batchv1.SuccessPolicyRule
		succeeded string
		want      string // "" when no rule is met
	}{
		{name: "no success yet", rules: []batchv1.SuccessPolicyRule{rule("", 1)}, succeeded: ""},
		{name: "count met", rules: []batchv1.SuccessPolicyRule{rule("", 1)}, succeeded: "2", want: "Matched rules at index 0"},
		{name: "count not met", rules: []batchv1.SuccessPolicyRule{rule("", 3)}, succeeded: "0-1"},
		{name: "every named index", rules: []batchv1.SuccessPolicyRule{rule("0", 0)}, succeeded: "0", want: "Matched rules at index 0"},
		{name: "named indexes missing one", rules: []batchv1.SuccessPolicyRule{rule("0-2", 0)}, succeeded: "0,2,3"},
		{name: "count of named indexes", rules: []batchv1.SuccessPolicyRule{rule("0-2", 2)}, succeeded: "0,2,3", want: "Matched rules at index 0"},
		{name: "later rule met", rules: []batchv1.SuccessPolicyRule{rule("4", 0), rule("", 2)}, succeeded: "0,1", want: "Matched rules at index 1"},
		{name: "indexes beyond completions never match", rules: []batchv1.SuccessPolicyRule{rule("7-9", 0)}, succeeded: "0-4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, met := matchSuccessPolicy(&batchv1.SuccessPolicy{Rules: tc.rules}, 5, parseIndexes(tc.succeeded, 5))
			if msg != tc.want || met != (tc.want != "") {
				t.Errorf("got %q, %v; want %q", msg, met, tc.want)
			}
		})
	}
}

// TestComputeSuccessPolicy follows the conformance spec 'Job with
// successPolicy succeededIndexes rule should succeeded even when some
// indexes remain pending': index 0 succeeded while index 1 runs, so the job
// meets its policy, deletes the running pod and completes by SuccessPolicy
// once it is gone; a policy met as the last index succeeds wins over
// CompletionsReached.
func TestComputeSuccessPolicy(t *testing.T) {
	job := makeJob("ns", "j", func(j *batchv1.Job) {
		j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
		j.Spec.Completions, j.Spec.Parallelism = ptrTo[int32](5), ptrTo[int32](2)
		j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptrTo("0")}}}
	})
	pods := []*v1.Pod{makePod("zero", indexAnn("0", phase(v1.PodSucceeded))), makePod("one", indexAnn("1", phase(v1.PodRunning)))}
	p := compute(snapshot{job: job, pods: pods, now: t0, manage: true})
	c := findCondition(p.status.Conditions, batchv1.JobSuccessCriteriaMet)
	if c == nil || c.Reason != batchv1.JobReasonSuccessPolicy || c.Message != "Matched rules at index 0" {
		t.Fatalf("conditions %+v", p.status.Conditions)
	}
	if got := names(p.deletes); len(got) != 1 || got[0] != "one" || len(p.creates) != 0 {
		t.Fatalf("deletes %v creates %v", got, p.creates)
	}
	if conditionTrue(p.status.Conditions, batchv1.JobComplete) || p.status.CompletedIndexes != "0" {
		t.Fatalf("status %+v", p.status)
	}

	// The deleted pod is gone: Complete, by the same reason.
	job.Status = p.status
	p = compute(snapshot{job: job, pods: pods[:1], now: t0, manage: true})
	c = findCondition(p.status.Conditions, batchv1.JobComplete)
	if c == nil || c.Reason != batchv1.JobReasonSuccessPolicy || p.status.Succeeded != 1 || p.status.Failed != 0 || p.status.Active != 0 || *p.status.Terminating != 0 {
		t.Fatalf("status %+v", p.status)
	}

	// All indexes succeed in one sync: SuccessPolicy, not CompletionsReached.
	all := makeJob("ns", "all", func(j *batchv1.Job) {
		j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
		j.Spec.Completions, j.Spec.Parallelism = ptrTo[int32](2), ptrTo[int32](2)
		j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptrTo[int32](2)}}}
	})
	p = compute(snapshot{job: all, pods: []*v1.Pod{makePod("a", indexAnn("0", phase(v1.PodSucceeded))), makePod("b", indexAnn("1", phase(v1.PodSucceeded)))}, now: t0, manage: true})
	if c := findCondition(p.status.Conditions, batchv1.JobComplete); c == nil || c.Reason != batchv1.JobReasonSuccessPolicy {
		t.Fatalf("conditions %+v", p.status.Conditions)
	}
}
