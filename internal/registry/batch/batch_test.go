package batch

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry/core"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func jobTemplate() v1.PodTemplateSpec {
	return v1.PodTemplateSpec{Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyNever,
		Containers:    []v1.Container{{Name: "pi", Image: "perl"}},
	}}
}

// makeJob returns a Job as the server stores it after create: uid set, selector generated,
// defaults applied; mutate runs last.
func makeJob(mutate func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pi", UID: "uid-1", CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Minute))},
		Spec:       batchv1.JobSpec{Template: jobTemplate()},
	}
	r := JobResource()
	r.PrepareForCreate(j)
	r.Default(j)
	if mutate != nil {
		mutate(j)
	}
	return j
}

func makeCronJob(mutate func(*batchv1.CronJob)) *batchv1.CronJob {
	c := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello", CreationTimestamp: metav1.NewTime(now.Add(-26 * time.Hour))},
		Spec: batchv1.CronJobSpec{
			Schedule:    "*/5 * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTemplate()}},
		},
	}
	DefaultCronJob(c)
	if mutate != nil {
		mutate(c)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// ownErrors drops the errors that also appear in others.
func ownErrors(errs, others field.ErrorList) []string {
	skip := map[string]bool{}
	for _, e := range others {
		skip[e.Error()] = true
	}
	var out []string
	for _, e := range errs {
		if !skip[e.Error()] {
			out = append(out, e.Error())
		}
	}
	return out
}

func TestJobCreate(t *testing.T) {
	j := makeJob(nil)
	wantPod := jobTemplate().Spec
	core.DefaultPodSpec(&wantPod)
	wantLabels := map[string]string{
		"batch.kubernetes.io/controller-uid": "uid-1", "batch.kubernetes.io/job-name": "pi",
		"controller-uid": "uid-1", "job-name": "pi",
	}
	want := batchv1.JobSpec{
		Parallelism: ptr[int32](1), Completions: ptr[int32](1), BackoffLimit: ptr[int32](6),
		Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "uid-1"}},
		ManualSelector: ptr(false),
		Template: v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: wantLabels},
			Spec:       wantPod,
		},
		CompletionMode:       ptr(batchv1.NonIndexedCompletion),
		Suspend:              ptr(false),
		PodReplacementPolicy: ptr(batchv1.TerminatingOrFailed),
	}
	if diff := cmp.Diff(want, j.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLabels, j.Labels); diff != "" {
		t.Errorf("job labels (-want +got):\n%s", diff)
	}
	if errs := JobResource().Validate(j); len(errs) != 0 {
		t.Errorf("valid job rejected: %v", errs)
	}
}

func TestJobDefaults(t *testing.T) {
	cases := []struct {
		name                   string
		spec                   batchv1.JobSpec
		parallelism, completes *int32
		backoff                int32
		replacement            batchv1.PodReplacementPolicy
	}{
		{name: "both unset", parallelism: ptr[int32](1), completes: ptr[int32](1), backoff: 6, replacement: batchv1.TerminatingOrFailed},
		{name: "completions only", spec: batchv1.JobSpec{Completions: ptr[int32](5)}, parallelism: ptr[int32](1), completes: ptr[int32](5), backoff: 6, replacement: batchv1.TerminatingOrFailed},
		{name: "parallelism only is a work queue", spec: batchv1.JobSpec{Parallelism: ptr[int32](3)}, parallelism: ptr[int32](3), backoff: 6, replacement: batchv1.TerminatingOrFailed},
		{
			name:        "per-index backoff and failure policy",
			spec:        batchv1.JobSpec{BackoffLimitPerIndex: ptr[int32](1), PodFailurePolicy: &batchv1.PodFailurePolicy{}},
			parallelism: ptr[int32](1), completes: ptr[int32](1), backoff: 1<<31 - 1, replacement: batchv1.Failed,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &batchv1.Job{Spec: tc.spec}
			DefaultJob(j)
			got := []interface{}{j.Spec.Parallelism, j.Spec.Completions, *j.Spec.BackoffLimit, *j.Spec.PodReplacementPolicy}
			want := []interface{}{tc.parallelism, tc.completes, tc.backoff, tc.replacement}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("defaults (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateJob(t *testing.T) {
	cases := []struct {
		name string
		job  *batchv1.Job
		want []string
	}{
		{name: "valid", job: makeJob(nil)},
		{
			name: "restart policy Always",
			job:  makeJob(func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = v1.RestartPolicyAlways }),
			want: []string{`spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"`},
		},
		{
			name: "restart policy unknown",
			job:  makeJob(func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = "Sometimes" }),
			want: []string{`spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "OnFailure", "Never"`},
		},
		{
			name: "negative counters",
			job: makeJob(func(j *batchv1.Job) {
				j.Spec.Parallelism = ptr[int32](-1)
				j.Spec.Completions = ptr[int32](-1)
				j.Spec.BackoffLimit = ptr[int32](-1)
				j.Spec.ActiveDeadlineSeconds = ptr[int64](-1)
				j.Spec.TTLSecondsAfterFinished = ptr[int32](-1)
			}),
			want: []string{
				"spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
				"spec.completions: Invalid value: -1: must be greater than or equal to 0",
				"spec.activeDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
				"spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
				"spec.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0",
			},
		},
		{
			name: "user label conflicts with generated one",
			job:  makeJob(func(j *batchv1.Job) { j.Spec.Template.Labels["job-name"] = "other" }),
			want: []string{`spec.template.metadata.labels[job-name]: Invalid value: {"batch.kubernetes.io/controller-uid":"uid-1","batch.kubernetes.io/job-name":"pi","controller-uid":"uid-1","job-name":"other"}: must be 'pi'`},
		},
		{
			name: "indexed without completions",
			job: makeJob(func(j *batchv1.Job) {
				j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
				j.Spec.Completions = nil
			}),
			want: []string{"spec.completions: Required value: when completion mode is Indexed"},
		},
		{
			name: "pod failure policy needs Never and Failed",
			job: makeJob(func(j *batchv1.Job) {
				j.Spec.Template.Spec.RestartPolicy = v1.RestartPolicyOnFailure
				j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{3, 1}},
				}}}
			}),
			want: []string{
				"spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [3,1]: must be ordered",
				`spec.podReplacementPolicy: Unsupported value: "TerminatingOrFailed": supported values: "Failed"`,
				`spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified`,
			},
		},
	}
	r := JobResource()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Pod template errors are the core package's; check only what Job adds.
			coreErrs := core.ValidatePodTemplateSpec(&tc.job.Spec.Template, field.NewPath("spec", "template"))
			if diff := cmp.Diff(tc.want, ownErrors(r.Validate(tc.job), coreErrs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateJobUpdate(t *testing.T) {
	suspended := func(j *batchv1.Job) { j.Spec.Suspend = ptr(true) }
	cases := []struct {
		name     string
		old, obj *batchv1.Job
		want     []string
	}{
		{name: "parallelism may change", old: makeJob(nil), obj: makeJob(func(j *batchv1.Job) { j.Spec.Parallelism = ptr[int32](4) })},
		{
			name: "completions immutable for NonIndexed",
			old:  makeJob(nil), obj: makeJob(func(j *batchv1.Job) { j.Spec.Completions = ptr[int32](2) }),
			want: []string{"spec.completions: Invalid value: 2: field is immutable"},
		},
		{
			name: "indexed completions scale with parallelism",
			old: makeJob(func(j *batchv1.Job) {
				j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
			}),
			obj: makeJob(func(j *batchv1.Job) {
				j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
				j.Spec.Completions, j.Spec.Parallelism = ptr[int32](3), ptr[int32](3)
			}),
		},
		{
			name: "template immutable while running",
			old:  makeJob(nil), obj: makeJob(func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"} }),
			want: []string{"spec.template: Invalid value: "},
		},
		{
			name: "suspended job may change node selector",
			old:  makeJob(suspended),
			obj: makeJob(func(j *batchv1.Job) {
				suspended(j)
				j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"}
			}),
		},
		{
			name: "suspended job may not change image",
			old:  makeJob(suspended),
			obj: makeJob(func(j *batchv1.Job) {
				suspended(j)
				j.Spec.Template.Spec.Containers[0].Image = "python"
			}),
			want: []string{"spec.template: Invalid value: "},
		},
		{
			name: "selector immutable",
			old:  makeJob(nil),
			obj: makeJob(func(j *batchv1.Job) {
				j.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "job-name", Operator: metav1.LabelSelectorOpExists}}}
			}),
			want: []string{`spec.selector: Invalid value: {"matchExpressions":[{"key":"job-name","operator":"Exists"}]}: field is immutable`},
		},
	}
	r := JobResource()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(r.ValidateUpdate(tc.obj, tc.old))
			// Template errors carry the whole template; compare their prefix only.
			for i := range got {
				if i < len(tc.want) && len(got[i]) > len(tc.want[i]) && tc.want[i] == "spec.template: Invalid value: " {
					got[i] = got[i][:len(tc.want[i])]
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJobRows(t *testing.T) {
	start := metav1.NewTime(now.Add(-75 * time.Second))
	cases := []struct {
		name string
		job  *batchv1.Job
		want []interface{}
	}{
		{
			name: "not started",
			job:  makeJob(nil),
			want: []interface{}{"pi", "Running", "0/1", "", "2m", "pi", "perl", "batch.kubernetes.io/controller-uid=uid-1"},
		},
		{
			name: "running work queue",
			job: makeJob(func(j *batchv1.Job) {
				j.Spec.Completions, j.Spec.Parallelism = nil, ptr[int32](3)
				j.Status.StartTime = &start
			}),
			want: []interface{}{"pi", "Running", "0/1 of 3", "75s", "2m", "pi", "perl", "batch.kubernetes.io/controller-uid=uid-1"},
		},
		{
			name: "complete",
			job: makeJob(func(j *batchv1.Job) {
				done := metav1.NewTime(start.Add(30 * time.Second))
				j.Status = batchv1.JobStatus{Succeeded: 1, StartTime: &start, CompletionTime: &done,
					Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: v1.ConditionTrue}, {Type: batchv1.JobComplete, Status: v1.ConditionTrue}}}
			}),
			want: []interface{}{"pi", "Complete", "1/1", "30s", "2m", "pi", "perl", "batch.kubernetes.io/controller-uid=uid-1"},
		},
		{
			name: "failure target",
			job: makeJob(func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: v1.ConditionTrue}}
			}),
			want: []interface{}{"pi", "FailureTarget", "0/1", "", "2m", "pi", "perl", "batch.kubernetes.io/controller-uid=uid-1"},
		},
		{
			name: "suspended",
			job: makeJob(func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: v1.ConditionTrue}}
			}),
			want: []interface{}{"pi", "Suspended", "0/1", "", "2m", "pi", "perl", "batch.kubernetes.io/controller-uid=uid-1"},
		},
		{
			name: "terminating",
			job:  makeJob(func(j *batchv1.Job) { j.DeletionTimestamp = &start }),
			want: []interface{}{"pi", "Terminating", "0/1", "", "2m", "pi", "perl", "batch.kubernetes.io/controller-uid=uid-1"},
		},
		{
			name: "failed",
			job: makeJob(func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: v1.ConditionTrue}}
			}),
			want: []interface{}{"pi", "Failed", "0/1", "", "2m", "pi", "perl", "batch.kubernetes.io/controller-uid=uid-1"},
		},
	}
	r := JobResource()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Row(tc.job, now)
			if len(got) != len(r.Columns) {
				t.Errorf("%d cells for %d columns", len(got), len(r.Columns))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff("1", r.Fields(makeJob(func(j *batchv1.Job) { j.Status.Succeeded = 1 }))["status.successful"]); diff != "" {
		t.Errorf("status.successful (-want +got):\n%s", diff)
	}
}

func TestCronJob(t *testing.T) {
	cases := []struct {
		name     string
		validate func(obj, old runtime.Object) field.ErrorList
		obj, old *batchv1.CronJob
		want     []string
	}{
		{name: "valid", obj: makeCronJob(nil)},
		{
			name: "bad schedule",
			obj:  makeCronJob(func(c *batchv1.CronJob) { c.Spec.Schedule = "* * * *" }),
			want: []string{`spec.schedule: Invalid value: "* * * *": expected exactly 5 fields, found 4: [* * * *]`},
		},
		{
			name: "TZ in schedule",
			obj:  makeCronJob(func(c *batchv1.CronJob) { c.Spec.Schedule = "TZ=UTC 0 * * * *" }),
			want: []string{`spec.schedule: Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead`},
		},
		{
			name: "TZ kept from stored schedule",
			obj:  makeCronJob(func(c *batchv1.CronJob) { c.Spec.Schedule = "TZ=UTC 0 * * * *" }),
			old:  makeCronJob(func(c *batchv1.CronJob) { c.Spec.Schedule = "TZ=UTC 5 * * * *" }),
		},
		{
			name: "unknown time zone",
			obj:  makeCronJob(func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr("Mars/Olympus") }),
			want: []string{`spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus`},
		},
		{
			name: "valid time zone",
			obj:  makeCronJob(func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr("Europe/Paris") }),
		},
		{
			name: "job template rules",
			obj: makeCronJob(func(c *batchv1.CronJob) {
				c.Spec.StartingDeadlineSeconds = ptr[int64](-1)
				c.Spec.ConcurrencyPolicy = "Sometimes"
				c.Spec.JobTemplate.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
				c.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = v1.RestartPolicyAlways
			}),
			want: []string{
				"spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
				`spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"`,
				`spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"`,
				`spec.jobTemplate.spec.selector: Invalid value: {"matchLabels":{"a":"b"}}: ` + "`selector` will be auto-generated",
			},
		},
		{
			name: "long name on create",
			obj:  makeCronJob(func(c *batchv1.CronJob) { c.Name = "a123456789b123456789c123456789d123456789e123456789f12" }),
			want: []string{`metadata.name: Invalid value: "a123456789b123456789c123456789d123456789e123456789f12": must be no more than 52 characters`},
		},
	}
	r := CronJobResource()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var errs field.ErrorList
			if tc.old == nil {
				errs = r.Validate(tc.obj)
			} else {
				errs = r.ValidateUpdate(tc.obj, tc.old)
			}
			if diff := cmp.Diff(tc.want, errStrings(errs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCronJobDefaultsAndRow(t *testing.T) {
	c := makeCronJob(nil)
	want := []interface{}{ptr(batchv1.AllowConcurrent), ptr(false), ptr[int32](3), ptr[int32](1)}
	got := []interface{}{&c.Spec.ConcurrencyPolicy, c.Spec.Suspend, c.Spec.SuccessfulJobsHistoryLimit, c.Spec.FailedJobsHistoryLimit}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	r := CronJobResource()
	last := metav1.NewTime(now.Add(-3 * time.Minute))
	c.Status = batchv1.CronJobStatus{LastScheduleTime: &last, Active: []v1.ObjectReference{{Name: "hello-1"}}}
	c.Spec.TimeZone = ptr("Etc/UTC")
	wantRow := []interface{}{"hello", "*/5 * * * *", "Etc/UTC", "False", int64(1), "3m", "26h", "pi", "perl", "<none>"}
	if diff := cmp.Diff(wantRow, r.Row(c, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if got := len(r.Columns); got != len(wantRow) {
		t.Errorf("%d columns for %d cells", got, len(wantRow))
	}
}

func TestHooksTolerateWrongTypes(t *testing.T) {
	for _, r := range []struct {
		name string
		obj  runtime.Object
	}{{"job", &batchv1.Job{}}, {"cronjob", &batchv1.CronJob{}}} {
		t.Run(r.name, func(t *testing.T) {
			res := JobResource()
			if r.name == "cronjob" {
				res = CronJobResource()
			}
			var nilObj runtime.Object = (*v1.Pod)(nil)
			res.Default(nilObj)
			res.Validate(nilObj)
			res.ValidateUpdate(r.obj, nilObj)
			res.Row(nilObj, now)
			res.Default(r.obj)
			res.Validate(r.obj)
			res.ValidateUpdate(r.obj, r.obj)
			res.Row(r.obj, now)
		})
	}
}
