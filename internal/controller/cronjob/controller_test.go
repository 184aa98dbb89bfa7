package cronjob

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/tranche/tranche/internal/registry/batch"
)

// t0 is a whole minute, so "*/5" start times fall on round times.
var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

type fixture struct {
	c       *Controller
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	clock   *testingclock.FakeClock
	events  *record.FakeRecorder
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		client: fake.NewClientset(objs...),
		clock:  testingclock.NewFakeClock(t0),
		events: record.NewFakeRecorder(1000),
	}
	f.client.PrependReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj := a.(clienttesting.CreateAction).GetObject().(metav1.Object)
		obj.SetUID(types.UID("uid-" + obj.GetName()))
		obj.SetCreationTimestamp(metav1.NewTime(f.clock.Now()))
		return false, nil, nil
	})
	f.factory = informers.NewSharedInformerFactory(f.client, 0)
	f.c = New(Config{Client: f.client, Informers: f.factory, Clock: f.clock, Recorder: f.events, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(f.c.queue.ShutDown)
	return f
}

// sync refills the caches from the client and syncs key, returning the
// requeue delay.
func (f *fixture) sync(t *testing.T, key string) time.Duration {
	t.Helper()
	ctx := context.Background()
	cjs, _ := f.client.BatchV1().CronJobs("").List(ctx, metav1.ListOptions{})
	jobs, _ := f.client.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	var items []any
	for i := range cjs.Items {
		items = append(items, &cjs.Items[i])
	}
	if err := f.factory.Batch().V1().CronJobs().Informer().GetIndexer().Replace(items, ""); err != nil {
		t.Fatal(err)
	}
	items = nil
	for i := range jobs.Items {
		items = append(items, &jobs.Items[i])
	}
	if err := f.factory.Batch().V1().Jobs().Informer().GetIndexer().Replace(items, ""); err != nil {
		t.Fatal(err)
	}
	d, err := f.c.sync(ctx, key)
	if err != nil {
		t.Fatalf("sync %s: %v", key, err)
	}
	return d
}

func (f *fixture) jobNames(t *testing.T) []string {
	t.Helper()
	l, err := f.client.BatchV1().Jobs("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range l.Items {
		out = append(out, j.Name)
	}
	sort.Strings(out)
	return out
}

// finishJob marks a Job Complete or Failed at the clock's time.
func (f *fixture) finishJob(t *testing.T, name string, cond batchv1.JobConditionType) {
	t.Helper()
	j, err := f.client.BatchV1().Jobs("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(f.clock.Now())
	j.Status.StartTime = &j.CreationTimestamp
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: cond, Status: v1.ConditionTrue, LastTransitionTime: now})
	if cond == batchv1.JobComplete {
		j.Status.CompletionTime = &now
	}
	if _, err := f.client.BatchV1().Jobs("default").UpdateStatus(context.Background(), j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) cronJob(t *testing.T) *batchv1.CronJob {
	t.Helper()
	cj, err := f.client.BatchV1().CronJobs("default").Get(context.Background(), "backup", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cj
}

func (f *fixture) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func makeCronJob(mut func(*batchv1.CronJob)) *batchv1.CronJob {
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "backup", UID: "uid-backup", CreationTimestamp: metav1.NewTime(t0)},
		Spec: batchv1.CronJobSpec{
			Schedule:                   "*/5 * * * *",
			TimeZone:                   ptr("UTC"),
			ConcurrencyPolicy:          batchv1.AllowConcurrent,
			Suspend:                    ptr(false),
			SuccessfulJobsHistoryLimit: ptr[int32](3),
			FailedJobsHistoryLimit:     ptr[int32](1),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "backup"}},
				Spec: batchv1.JobSpec{Template: v1.PodTemplateSpec{Spec: v1.PodSpec{
					RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}},
			},
		},
	}
	if mut != nil {
		mut(cj)
	}
	return cj
}

func ptr[T any](v T) *T { return &v }

func name(at time.Time) string { return fmt.Sprintf("backup-%d", at.Unix()/60) }

func TestCreatesJobAtScheduleAndKeepsHistory(t *testing.T) {
	f := newFixture(t, makeCronJob(nil))
	key := "default/backup"
	if d := f.sync(t, key); d != 5*time.Minute+nextScheduleDelta {
		t.Fatalf("requeue %v, want 5m0.1s", d)
	}
	if got := f.jobNames(t); len(got) != 0 {
		t.Fatalf("jobs before the schedule: %v", got)
	}
	var started []string
	for i := 1; i <= 5; i++ {
		f.clock.Step(5 * time.Minute)
		at := t0.Add(time.Duration(i) * 5 * time.Minute)
		if d := f.sync(t, key); d != 5*time.Minute+nextScheduleDelta {
			t.Fatalf("run %d: requeue %v", i, d)
		}
		started = append(started, name(at))
		cj := f.cronJob(t)
		if len(cj.Status.Active) != 1 || cj.Status.Active[0].Name != name(at) || !cj.Status.LastScheduleTime.Time.Equal(at) {
			t.Fatalf("run %d: status %+v", i, cj.Status)
		}
		j, err := f.client.BatchV1().Jobs("default").Get(context.Background(), name(at), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if j.Labels["app"] != "backup" || j.Annotations[scheduledTimestampAnnotation] != at.Format(time.RFC3339) || metav1.GetControllerOf(j).UID != "uid-backup" {
			t.Fatalf("job %+v", j.ObjectMeta)
		}
		f.clock.Step(time.Minute)
		f.finishJob(t, name(at), batchv1.JobComplete)
		f.clock.Step(-time.Minute)
	}
	f.sync(t, key)
	// Five succeeded, limit 3: the two oldest went.
	if diff := cmp.Diff(started[2:], f.jobNames(t)); diff != "" {
		t.Fatalf("history (-want +got):\n%s", diff)
	}
	cj := f.cronJob(t)
	if len(cj.Status.Active) != 0 || !cj.Status.LastSuccessfulTime.Time.Equal(t0.Add(26*time.Minute)) {
		t.Fatalf("status %+v", cj.Status)
	}
}

func TestForbidSkipsWhileActive(t *testing.T) {
	f := newFixture(t, makeCronJob(func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent }))
	key := "default/backup"
	f.clock.Step(5 * time.Minute)
	f.sync(t, key)
	f.clock.Step(5 * time.Minute)
	f.drainEvents()
	f.sync(t, key)
	if diff := cmp.Diff([]string{name(t0.Add(5 * time.Minute))}, f.jobNames(t)); diff != "" {
		t.Fatalf("jobs (-want +got):\n%s", diff)
	}
	if evs := f.drainEvents(); len(evs) != 1 || evs[0] != "Normal JobAlreadyActive Not starting job because prior execution is running and concurrency policy is Forbid" {
		t.Errorf("events %v", evs)
	}
	// Once the active one finished, the next start time runs.
	f.finishJob(t, name(t0.Add(5*time.Minute)), batchv1.JobComplete)
	f.clock.Step(5 * time.Minute)
	f.sync(t, key)
	if got := f.jobNames(t); len(got) != 2 || got[1] != name(t0.Add(15*time.Minute)) {
		t.Fatalf("jobs %v", got)
	}
}

func TestReplaceDeletesActive(t *testing.T) {
	f := newFixture(t, makeCronJob(func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent }))
	key := "default/backup"
	f.clock.Step(5 * time.Minute)
	f.sync(t, key)
	f.clock.Step(5 * time.Minute)
	f.sync(t, key)
	if diff := cmp.Diff([]string{name(t0.Add(10 * time.Minute))}, f.jobNames(t)); diff != "" {
		t.Fatalf("jobs (-want +got):\n%s", diff)
	}
	if a := f.cronJob(t).Status.Active; len(a) != 1 || a[0].Name != name(t0.Add(10*time.Minute)) {
		t.Fatalf("active %+v", a)
	}
}

func TestCompute(t *testing.T) {
	job := func(n string, mut func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: n, UID: types.UID(n)}}
		if mut != nil {
			mut(j)
		}
		return j
	}
	cases := []struct {
		name    string
		cj      func(*batchv1.CronJob)
		jobs    []*batchv1.Job
		gone    map[types.UID]bool
		now     time.Time
		create  string
		events  []string
		requeue time.Duration
		active  int
	}{
		{name: "not yet due", now: t0.Add(4 * time.Minute), requeue: time.Minute + nextScheduleDelta},
		{name: "due", now: t0.Add(5 * time.Minute), create: name(t0.Add(5 * time.Minute)), requeue: 5*time.Minute + nextScheduleDelta},
		{name: "suspended", cj: func(cj *batchv1.CronJob) { cj.Spec.Suspend = ptr(true) }, now: t0.Add(5 * time.Minute)},
		{
			name:    "many missed: only the most recent, with a warning",
			now:     t0.Add(1000 * time.Minute),
			create:  name(t0.Add(1000 * time.Minute)),
			events:  []string{"Warning TooManyMissedTimes too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"},
			requeue: 5*time.Minute + nextScheduleDelta,
		},
		{
			name:    "startingDeadlineSeconds bounds the missed count",
			cj:      func(cj *batchv1.CronJob) { cj.Spec.StartingDeadlineSeconds = ptr[int64](600) },
			now:     t0.Add(1002 * time.Minute),
			create:  name(t0.Add(1000 * time.Minute)),
			requeue: 3*time.Minute + nextScheduleDelta,
		},
		{
			name:    "start time older than the deadline is skipped",
			cj:      func(cj *batchv1.CronJob) { cj.Spec.StartingDeadlineSeconds = ptr[int64](60) },
			now:     t0.Add(7 * time.Minute),
			requeue: 3*time.Minute + nextScheduleDelta,
		},
		{
			name:    "time zone",
			cj:      func(cj *batchv1.CronJob) { cj.Spec.Schedule = "0 9 * * *"; cj.Spec.TimeZone = ptr("Europe/Paris") },
			now:     time.Date(2026, 1, 2, 8, 0, 0, 0, time.UTC),
			create:  name(time.Date(2026, 1, 2, 8, 0, 0, 0, time.UTC)),
			requeue: 24*time.Hour + nextScheduleDelta,
		},
		{
			name: "finished active job leaves the list",
			cj: func(cj *batchv1.CronJob) {
				cj.Status.Active = []v1.ObjectReference{{Name: "old", UID: "old"}, {Name: "missing", UID: "missing"}}
				cj.Status.LastScheduleTime = &metav1.Time{Time: t0}
			},
			jobs: []*batchv1.Job{job("old", func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: v1.ConditionTrue}}
			})},
			gone:    map[types.UID]bool{"missing": true},
			now:     t0.Add(time.Minute),
			events:  []string{"Normal SawCompletedJob Saw completed job: old, condition: Failed", "Normal MissingJob Active job went missing: missing"},
			requeue: 4*time.Minute + nextScheduleDelta,
		},
		{
			name: "existing job for the start time is not recreated",
			jobs: []*batchv1.Job{job(name(t0.Add(5*time.Minute)), func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: v1.ConditionTrue}}
			})},
			now:     t0.Add(5 * time.Minute),
			requeue: 5*time.Minute + nextScheduleDelta,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cj := makeCronJob(tc.cj)
			loc, err := time.LoadLocation(*cj.Spec.TimeZone)
			if err != nil {
				t.Fatal(err)
			}
			sched, err := batch.ParseSchedule(cj.Spec.Schedule)
			if err != nil {
				t.Fatal(err)
			}
			p := compute(snapshot{cj: cj, jobs: tc.jobs, gone: tc.gone, sched: sched, loc: loc, now: tc.now})
			got := ""
			if p.create != nil {
				got = p.create.Name
			}
			if got != tc.create {
				t.Errorf("create %q, want %q", got, tc.create)
			}
			var events []string
			for _, e := range p.events {
				events = append(events, e.eventType+" "+e.reason+" "+e.message)
			}
			if diff := cmp.Diff(tc.events, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if p.requeue != tc.requeue {
				t.Errorf("requeue %v, want %v", p.requeue, tc.requeue)
			}
		})
	}
}

func TestMostRecentStart(t *testing.T) {
	weekdays, err := batch.ParseSchedule("30 9 * * 1-5")
	if err != nil {
		t.Fatal(err)
	}
	every5, _ := batch.ParseSchedule("*/5 * * * *")
	// 2026-01-02 is a Friday.
	cases := []struct {
		name            string
		sched           cron.Schedule
		earliest, now   time.Time
		want            time.Time
		wantCountAbove0 bool
	}{
		{name: "none due", sched: every5, earliest: t0, now: t0.Add(4 * time.Minute)},
		{name: "one due", sched: every5, earliest: t0, now: t0.Add(5 * time.Minute), want: t0.Add(5 * time.Minute), wantCountAbove0: true},
		{name: "a year late", sched: every5, earliest: t0, now: t0.Add(365*24*time.Hour + 7*time.Minute), want: t0.Add(365*24*time.Hour + 5*time.Minute), wantCountAbove0: true},
		{
			name:  "weekdays over weekends",
			sched: weekdays, earliest: t0, now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), // a Sunday
			want: time.Date(2026, 2, 27, 9, 30, 0, 0, time.UTC), wantCountAbove0: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mostRecentStart(tc.sched, tc.earliest, tc.now)
			if !m.mostRecent.Equal(tc.want) || (m.count > 0) != tc.wantCountAbove0 {
				t.Errorf("got %v (count %d), want %v", m.mostRecent, m.count, tc.want)
			}
		})
	}
}
