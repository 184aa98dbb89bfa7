package job

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a controller over a fake clientset whose informer caches are
// refilled from the client before each sync.
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
	var seq atomic.Int64
	f.client.PrependReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj := a.(clienttesting.CreateAction).GetObject().(metav1.Object)
		if obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), seq.Add(1)))
		}
		if obj.GetUID() == "" {
			obj.SetUID(types.UID("uid-" + obj.GetName()))
		}
		obj.SetCreationTimestamp(metav1.NewTime(f.clock.Now()))
		return false, nil, nil
	})
	f.factory = informers.NewSharedInformerFactory(f.client, 0)
	f.c = New(Config{Client: f.client, Informers: f.factory, Clock: f.clock, Recorder: f.events, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(f.c.queue.ShutDown)
	return f
}

// sync refills the caches from the client, marks every write observed
// and syncs key.
func (f *fixture) sync(t *testing.T, key string) {
	t.Helper()
	ctx := context.Background()
	jobs, _ := f.client.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	pods, _ := f.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	var items []any
	for i := range jobs.Items {
		items = append(items, &jobs.Items[i])
	}
	if err := f.factory.Batch().V1().Jobs().Informer().GetIndexer().Replace(items, ""); err != nil {
		t.Fatal(err)
	}
	items = nil
	for i := range pods.Items {
		items = append(items, &pods.Items[i])
	}
	if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Replace(items, ""); err != nil {
		t.Fatal(err)
	}
	f.c.expectations.Forget(key)
	f.c.finalizersMu.Lock()
	delete(f.c.finalizers, key)
	f.c.finalizersMu.Unlock()
	if err := f.c.sync(ctx, key); err != nil {
		t.Fatalf("sync %s: %v", key, err)
	}
}

func (f *fixture) pods(t *testing.T) []v1.Pod {
	t.Helper()
	l, err := f.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

func (f *fixture) job(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	j, err := f.client.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// finishPod sets a pod's phase, as the node agent would, ending at the
// fixture clock's time.
func (f *fixture) finishPod(t *testing.T, pod v1.Pod, phase v1.PodPhase) {
	t.Helper()
	code := int32(0)
	if phase == v1.PodFailed {
		code = 1
	}
	pod.Status.Phase = phase
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		ExitCode: code, FinishedAt: metav1.NewTime(f.clock.Now())}}}}
	if _, err := f.client.CoreV1().Pods(pod.Namespace).UpdateStatus(context.Background(), &pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
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

func makeJob(ns, name string, mut func(*batchv1.Job)) *batchv1.Job {
	uid := types.UID("uid-" + name)
	l := map[string]string{batchv1.ControllerUidLabel: string(uid), batchv1.JobNameLabel: name}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Labels: l},
		Spec: batchv1.JobSpec{
			Completions:    ptrTo[int32](1),
			Parallelism:    ptrTo[int32](1),
			BackoffLimit:   ptrTo[int32](6),
			CompletionMode: ptrTo(batchv1.NonIndexedCompletion),
			Suspend:        ptrTo(false),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: string(uid)}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever,
					Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	if mut != nil {
		mut(j)
	}
	return j
}

func TestJobRunsToCompletion(t *testing.T) {
	f := newFixture(t, makeJob("default", "migration", nil))
	f.sync(t, "default/migration")
	pods := f.pods(t)
	if len(pods) != 1 {
		t.Fatalf("got %d pods, want 1", len(pods))
	}
	pod := pods[0]
	if !strings.HasPrefix(pod.Name, "migration-") || pod.Labels[batchv1.JobNameLabel] != "migration" ||
		!hasFinalizer(&pod) || metav1.GetControllerOf(&pod) == nil {
		t.Fatalf("pod shape: %+v", pod.ObjectMeta)
	}
	st := f.job(t, "default", "migration").Status
	if st.Active != 1 || st.StartTime == nil || st.Succeeded != 0 {
		t.Fatalf("status after create: %+v", st)
	}

	f.clock.Step(3 * time.Second)
	f.finishPod(t, pod, v1.PodSucceeded)
	f.client.ClearActions()
	f.sync(t, "default/migration")

	// Exactly: uncounted recorded, finalizer removed, counted status.
	var writes []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" {
			continue
		}
		w := a.GetVerb() + " " + a.GetResource().Resource
		if u, ok := a.(clienttesting.UpdateAction); ok {
			st := u.GetObject().(*batchv1.Job).Status
			w += fmt.Sprintf(" uncounted=%d succeeded=%d", len(st.UncountedTerminatedPods.Succeeded), st.Succeeded)
		}
		writes = append(writes, w)
	}
	want := []string{"update jobs uncounted=1 succeeded=0", "patch pods", "update jobs uncounted=0 succeeded=1"}
	if diff := cmp.Diff(want, writes); diff != "" {
		t.Fatalf("writes (-want +got):\n%s", diff)
	}
	if got := f.pods(t)[0]; hasFinalizer(&got) {
		t.Error("finalizer not removed")
	}
	st = f.job(t, "default", "migration").Status
	var conds []string
	for _, c := range st.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s %s %s", c.Type, c.Status, c.Reason, c.Message))
	}
	wantConds := []string{
		"SuccessCriteriaMet=True CompletionsReached Reached expected number of completions",
		"Complete=True CompletionsReached Reached expected number of completions",
	}
	if diff := cmp.Diff(wantConds, conds); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if st.CompletionTime == nil || !st.CompletionTime.Time.Equal(t0.Add(3*time.Second)) || st.Active != 0 || st.Succeeded != 1 {
		t.Errorf("status: %+v", st)
	}
	evs := f.drainEvents()
	if len(evs) == 0 || evs[len(evs)-1] != "Normal Completed Job completed" {
		t.Errorf("events %v", evs)
	}

	// Nothing more happens, and the succeeded pod is never counted twice.
	f.sync(t, "default/migration")
	if st := f.job(t, "default", "migration").Status; st.Succeeded != 1 || len(f.pods(t)) != 1 {
		t.Errorf("second sync changed things: %+v", st)
	}
}

func TestJobBackoffThenFailed(t *testing.T) {
	f := newFixture(t, makeJob("default", "j", func(j *batchv1.Job) { j.Spec.BackoffLimit = ptrTo[int32](2) }))
	key := "default/j"
	f.sync(t, key)
	for attempt, delay := range []time.Duration{10 * time.Second, 20 * time.Second} {
		live := activePods(f.pods(t))
		if len(live) != 1 {
			t.Fatalf("attempt %d: %d active pods", attempt, len(live))
		}
		f.finishPod(t, live[0], v1.PodFailed)
		f.sync(t, key)
		if n := len(activePods(f.pods(t))); n != 0 {
			t.Fatalf("attempt %d: recreated before the backoff", attempt)
		}
		if st := f.job(t, "default", "j").Status; st.Failed != int32(attempt+1) {
			t.Fatalf("attempt %d: failed=%d", attempt, st.Failed)
		}
		f.clock.Step(delay - time.Second)
		f.sync(t, key)
		if n := len(activePods(f.pods(t))); n != 0 {
			t.Fatalf("attempt %d: recreated a second before the %v backoff", attempt, delay)
		}
		f.clock.Step(time.Second)
		f.sync(t, key)
	}
	live := activePods(f.pods(t))
	if len(live) != 1 {
		t.Fatalf("%d active pods for the third attempt", len(live))
	}
	f.drainEvents()
	f.finishPod(t, live[0], v1.PodFailed)
	f.sync(t, key)
	st := f.job(t, "default", "j").Status
	if st.Failed != 3 || len(st.Conditions) != 2 ||
		st.Conditions[0].Type != batchv1.JobFailureTarget || st.Conditions[1].Type != batchv1.JobFailed ||
		st.Conditions[1].Reason != "BackoffLimitExceeded" || st.Conditions[1].Message != "Job has reached the specified backoff limit" {
		t.Fatalf("status: %+v", st)
	}
	if evs := f.drainEvents(); len(evs) == 0 || evs[len(evs)-1] != "Warning BackoffLimitExceeded Job has reached the specified backoff limit" {
		t.Errorf("events %v", evs)
	}
}

func activePods(pods []v1.Pod) []v1.Pod {
	var out []v1.Pod
	for _, p := range pods {
		if isActive(&p) {
			out = append(out, p)
		}
	}
	return out
}

func TestTTLDeletesFinishedJob(t *testing.T) {
	j := makeJob("default", "j", func(j *batchv1.Job) {
		j.Spec.TTLSecondsAfterFinished = ptrTo[int32](60)
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
	})
	f := newFixture(t, j)
	f.sync(t, "default/j")
	f.clock.Step(60 * time.Second)
	f.client.ClearActions()
	f.sync(t, "default/j")
	var deleted bool
	for _, a := range f.client.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok && a.GetResource().Resource == "jobs" {
			deleted = true
			if p := d.GetDeleteOptions().PropagationPolicy; p == nil || *p != metav1.DeletePropagationBackground {
				t.Errorf("propagation %v", p)
			}
		}
	}
	if !deleted {
		t.Error("job not deleted after its TTL")
	}
}

func makePod(name string, mut func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
		Finalizers: []string{batchv1.JobTrackingFinalizer}, CreationTimestamp: metav1.NewTime(t0)}}
	if mut != nil {
		mut(p)
	}
	return p
}

func phase(ph v1.PodPhase) func(*v1.Pod) { return func(p *v1.Pod) { p.Status.Phase = ph } }

func indexAnn(ix string, mut func(*v1.Pod)) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: ix}
		if mut != nil {
			mut(p)
		}
	}
}

func TestCompute(t *testing.T) {
	indexed := func(completions, parallelism int32) func(*batchv1.Job) {
		return func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
			j.Spec.Completions, j.Spec.Parallelism = &completions, &parallelism
		}
	}
	cases := []struct {
		name    string
		job     func(*batchv1.Job)
		pods    []*v1.Pod
		pending map[types.UID]bool
		now     time.Time
		creates []int
		deletes []string
		removed []string
		check   func(t *testing.T, p plan)
	}{
		{
			name:    "parallelism bounded by remaining completions",
			job:     func(j *batchv1.Job) { j.Spec.Completions, j.Spec.Parallelism = ptrTo[int32](5), ptrTo[int32](3) },
			pods:    []*v1.Pod{makePod("a", phase(v1.PodSucceeded)), makePod("b", phase(v1.PodSucceeded)), makePod("c", phase(v1.PodRunning))},
			creates: []int{noIndex, noIndex},
			removed: []string{"a", "b"},
			check: func(t *testing.T, p plan) {
				if p.status.Succeeded != 2 || p.status.Active != 3 || p.interim == nil || len(p.interim.UncountedTerminatedPods.Succeeded) != 2 {
					t.Errorf("status %+v interim %+v", p.status, p.interim)
				}
			},
		},
		{
			name: "already uncounted pods are not recorded twice",
			job: func(j *batchv1.Job) {
				j.Spec.Completions = ptrTo[int32](2)
				j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"a", "gone"}}
			},
			pods:    []*v1.Pod{makePod("a", phase(v1.PodSucceeded))},
			removed: []string{"a"},
			check: func(t *testing.T, p plan) {
				if p.interim != nil || p.status.Succeeded != 2 || !isFinished(&p.status) {
					t.Errorf("interim %+v status %+v", p.interim, p.status)
				}
			},
		},
		{
			name:    "pending finalizer removal is not counted again",
			job:     func(j *batchv1.Job) { j.Spec.Completions = ptrTo[int32](2); j.Status.Succeeded = 1 },
			pods:    []*v1.Pod{makePod("a", phase(v1.PodSucceeded))},
			pending: map[types.UID]bool{"a": true},
			creates: []int{noIndex},
			check: func(t *testing.T, p plan) {
				if p.interim != nil || p.status.Succeeded != 1 {
					t.Errorf("interim %+v status %+v", p.interim, p.status)
				}
			},
		},
		{
			name:    "too many active pods: the youngest goes",
			job:     func(j *batchv1.Job) { j.Spec.Completions = nil; j.Spec.Parallelism = ptrTo[int32](1) },
			pods:    []*v1.Pod{makePod("old", nil), makePod("young", func(p *v1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(time.Second)) })},
			deletes: []string{"young"},
		},
		{
			name: "work queue: done once one succeeded and none is active",
			job:  func(j *batchv1.Job) { j.Spec.Completions = nil; j.Spec.Parallelism = ptrTo[int32](2) },
			pods: []*v1.Pod{makePod("a", phase(v1.PodSucceeded))}, removed: []string{"a"},
			check: func(t *testing.T, p plan) {
				if !conditionTrue(p.status.Conditions, batchv1.JobComplete) {
					t.Errorf("not complete: %+v", p.status.Conditions)
				}
			},
		},
		{
			name: "active deadline exceeded",
			job: func(j *batchv1.Job) {
				j.Spec.ActiveDeadlineSeconds = ptrTo[int64](30)
				j.Status.StartTime = &metav1.Time{Time: t0}
			},
			pods:    []*v1.Pod{makePod("a", phase(v1.PodRunning))},
			now:     t0.Add(30 * time.Second),
			deletes: []string{"a"},
			check: func(t *testing.T, p plan) {
				c := findCondition(p.status.Conditions, batchv1.JobFailureTarget)
				if c == nil || c.Reason != "DeadlineExceeded" || c.Message != "Job was active longer than specified deadline" {
					t.Errorf("conditions %+v", p.status.Conditions)
				}
				if conditionTrue(p.status.Conditions, batchv1.JobFailed) {
					t.Error("Failed before the pod terminated")
				}
				if *p.status.Terminating != 1 || p.status.Active != 0 {
					t.Errorf("status %+v", p.status)
				}
			},
		},
		{
			name: "deadline ahead is requeued",
			job: func(j *batchv1.Job) {
				j.Spec.ActiveDeadlineSeconds = ptrTo[int64](30)
				j.Status.StartTime = &metav1.Time{Time: t0}
			},
			pods: []*v1.Pod{makePod("a", phase(v1.PodRunning))},
			now:  t0.Add(10 * time.Second),
			check: func(t *testing.T, p plan) {
				if p.requeue != 20*time.Second {
					t.Errorf("requeue %v", p.requeue)
				}
			},
		},
		{
			name:    "suspend deletes active pods",
			job:     func(j *batchv1.Job) { j.Spec.Suspend = ptrTo(true) },
			pods:    []*v1.Pod{makePod("a", phase(v1.PodRunning))},
			deletes: []string{"a"},
			check: func(t *testing.T, p plan) {
				c := findCondition(p.status.Conditions, batchv1.JobSuspended)
				if c == nil || c.Status != v1.ConditionTrue || c.Reason != "JobSuspended" {
					t.Errorf("conditions %+v", p.status.Conditions)
				}
			},
		},
		{
			name: "pods deleted by suspension are not failures",
			job:  func(j *batchv1.Job) { j.Spec.Suspend = ptrTo(true) },
			pods: []*v1.Pod{makePod("a", func(p *v1.Pod) {
				p.Status.Phase = v1.PodRunning
				p.DeletionTimestamp = &metav1.Time{Time: t0}
			})},
			removed: []string{"a"},
			check: func(t *testing.T, p plan) {
				if p.status.Failed != 0 {
					t.Errorf("failed %d", p.status.Failed)
				}
			},
		},
		{
			name:    "indexed: lowest missing indexes first",
			job:     indexed(5, 2),
			pods:    []*v1.Pod{makePod("p0", indexAnn("0", phase(v1.PodSucceeded))), makePod("p2", indexAnn("2", phase(v1.PodRunning)))},
			creates: []int{1},
			removed: []string{"p0"},
			check: func(t *testing.T, p plan) {
				if p.status.CompletedIndexes != "0" || p.status.Succeeded != 1 {
					t.Errorf("status %+v", p.status)
				}
			},
		},
		{
			name:    "indexed: duplicate and invalid indexes deleted",
			job:     indexed(3, 3),
			pods:    []*v1.Pod{makePod("a", indexAnn("0", nil)), makePod("b", indexAnn("0", func(p *v1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(time.Second)) })), makePod("c", indexAnn("7", nil))},
			creates: []int{1, 2},
			deletes: []string{"b", "c"},
		},
		{
			name: "indexed: completed indexes merge",
			job: func(j *batchv1.Job) {
				indexed(4, 1)(j)
				j.Status.CompletedIndexes = "0-1"
				j.Status.Succeeded = 2
			},
			pods:    []*v1.Pod{makePod("p3", indexAnn("3", phase(v1.PodSucceeded)))},
			creates: []int{2},
			removed: []string{"p3"},
			check: func(t *testing.T, p plan) {
				if p.status.CompletedIndexes != "0-1,3" || p.status.Succeeded != 3 {
					t.Errorf("status %+v", p.status)
				}
			},
		},
		{
			name:    "per-index backoff: a failed index waits, then retries",
			job:     perIndex(3, 1, nil),
			pods:    []*v1.Pod{makePod("a", indexAnn("0", nil)), failedIndexPod("b", "1", 0), makePod("c", indexAnn("2", nil))},
			removed: []string{"b"},
			check: func(t *testing.T, p plan) {
				if p.requeue != 10*time.Second || p.indexFailures[1] != 1 || *p.status.FailedIndexes != "" {
					t.Errorf("requeue %v failures %v status %+v", p.requeue, p.indexFailures, p.status)
				}
			},
		},
		{
			name:    "per-index limit exceeded: the index fails alone",
			job:     perIndex(3, 1, nil),
			pods:    []*v1.Pod{makePod("a", indexAnn("0", nil)), failedIndexPod("b", "1", 1), makePod("c", indexAnn("2", nil))},
			removed: []string{"b"},
			check: func(t *testing.T, p plan) {
				if *p.status.FailedIndexes != "1" || *p.interim.FailedIndexes != "1" || conditionTrue(p.status.Conditions, batchv1.JobFailureTarget) {
					t.Errorf("status %+v", p.status)
				}
			},
		},
		{
			name:    "per-index: all indexes finished with failures",
			job:     perIndex(2, 1, nil),
			pods:    []*v1.Pod{makePod("a", indexAnn("0", phase(v1.PodSucceeded))), failedIndexPod("b", "1", 1)},
			removed: []string{"a", "b"},
			check: func(t *testing.T, p plan) {
				c := findCondition(p.status.Conditions, batchv1.JobFailed)
				if c == nil || c.Reason != "FailedIndexes" || c.Message != "Job has failed indexes" {
					t.Errorf("conditions %+v", p.status.Conditions)
				}
			},
		},
		{
			name:    "per-index: maxFailedIndexes exceeded",
			job:     perIndex(3, 0, ptrTo[int32](0)),
			pods:    []*v1.Pod{failedIndexPod("b", "1", 0), makePod("c", indexAnn("2", nil))},
			deletes: []string{"c"},
			removed: []string{"b"},
			check: func(t *testing.T, p plan) {
				c := findCondition(p.status.Conditions, batchv1.JobFailureTarget)
				if c == nil || c.Reason != "MaxFailedIndexesExceeded" || c.Message != "Job has exceeded the specified maximal number of failed indexes" {
					t.Errorf("conditions %+v", p.status.Conditions)
				}
			},
		},
		{
			name: "pod failure policy FailJob",
			job: func(j *batchv1.Job) {
				j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action:      batchv1.PodFailurePolicyActionFailJob,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
				}}}
			},
			pods: []*v1.Pod{makePod("a", func(p *v1.Pod) {
				p.Status.Phase = v1.PodFailed
				p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 42}}}}
			})},
			removed: []string{"a"},
			check: func(t *testing.T, p plan) {
				c := findCondition(p.status.Conditions, batchv1.JobFailed)
				if c == nil || c.Reason != "PodFailurePolicy" || c.Message != "Container c for pod ns/a failed with exit code 42 matching FailJob rule at index 0" {
					t.Errorf("conditions %+v", p.status.Conditions)
				}
			},
		},
		{
			name: "pod failure policy Ignore: not counted, replaced at once",
			job: func(j *batchv1.Job) {
				j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action:          batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}},
				}}}
			},
			pods: []*v1.Pod{makePod("a", func(p *v1.Pod) {
				p.Status.Phase = v1.PodFailed
				p.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}}
			})},
			creates: []int{noIndex},
			removed: []string{"a"},
			check: func(t *testing.T, p plan) {
				if p.status.Failed != 0 {
					t.Errorf("failed %d", p.status.Failed)
				}
			},
		},
		{
			name: "deleted running pod counts as failed (TerminatingOrFailed)",
			pods: []*v1.Pod{makePod("a", func(p *v1.Pod) {
				p.Status.Phase = v1.PodRunning
				p.DeletionTimestamp = &metav1.Time{Time: t0}
			})},
			removed: []string{"a"},
			check: func(t *testing.T, p plan) {
				if p.status.Failed != 1 || *p.status.Terminating != 1 {
					t.Errorf("status %+v", p.status)
				}
			},
			creates: []int{noIndex},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := makeJob("ns", "j", tc.job)
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			p := compute(snapshot{job: job, pods: tc.pods, pendingFinalizers: tc.pending, now: now, manage: true})
			if diff := cmp.Diff(tc.creates, p.creates); diff != "" {
				t.Errorf("creates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.deletes, names(p.deletes)); diff != "" {
				t.Errorf("deletes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.removed, names(p.removeFinalizers)); diff != "" {
				t.Errorf("finalizer removals (-want +got):\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, p)
			}
		})
	}
}

// perIndex is an Indexed job with a backoffLimitPerIndex.
func perIndex(completions, limit int32, maxFailed *int32) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
		j.Spec.Completions, j.Spec.Parallelism = &completions, &completions
		j.Spec.BackoffLimitPerIndex, j.Spec.MaxFailedIndexes = &limit, maxFailed
		j.Spec.BackoffLimit = ptrTo[int32](1<<31 - 1)
	}
}

// failedIndexPod is a pod of index ix that failed at t0 after earlier
// failures of its index.
func failedIndexPod(name, ix string, earlier int) *v1.Pod {
	return makePod(name, func(p *v1.Pod) {
		p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: ix,
			batchv1.JobIndexFailureCountAnnotation: fmt.Sprint(earlier)}
		p.Status.Phase = v1.PodFailed
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: 1, FinishedAt: metav1.NewTime(t0)}}}}
	})
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

func TestIndexedPodShape(t *testing.T) {
	job := makeJob("ns", "work", func(j *batchv1.Job) { j.Spec.Template.Spec.Subdomain = "svc" })
	pod := newPod(job, 3, 0)
	if pod.GenerateName != "work-3-" || pod.Spec.Hostname != "work-3" || pod.Spec.Subdomain != "svc" ||
		pod.Annotations[batchv1.JobCompletionIndexAnnotation] != "3" || pod.Labels[podIndexLabel] != "3" {
		t.Errorf("pod %+v", pod)
	}
	env := pod.Spec.Containers[0].Env
	if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" ||
		env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
		t.Errorf("env %+v", env)
	}
	if job.Spec.Template.Spec.Containers[0].Env != nil {
		t.Error("template mutated")
	}
}

func TestIndexes(t *testing.T) {
	cases := []struct{ in, out string }{
		{"", ""}, {"0", "0"}, {"0,1,2,5", "0-2,5"}, {"3-4,1", "1,3-4"}, {"0-2,x,9", "0-2"},
	}
	for _, tc := range cases {
		if got := formatIndexes(parseIndexes(tc.in, 8)); got != tc.out {
			t.Errorf("%q → %q, want %q", tc.in, got, tc.out)
		}
	}
}

func TestBackoffLeft(t *testing.T) {
	failedAt := func(name string, at time.Duration) *v1.Pod {
		return makePod(name, func(p *v1.Pod) {
			p.Status.Phase = v1.PodFailed
			p.Status.ContainerStatuses = []v1.ContainerStatus{{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{FinishedAt: metav1.NewTime(t0.Add(at))}}}}
		})
	}
	cases := []struct {
		name string
		pods []*v1.Pod
		now  time.Duration
		want time.Duration
	}{
		{name: "no failure", want: 0},
		{name: "one failure", pods: []*v1.Pod{failedAt("a", 0)}, want: 10 * time.Second},
		{name: "three failures", pods: []*v1.Pod{failedAt("a", 0), failedAt("b", 0), failedAt("c", 0)}, now: 5 * time.Second, want: 35 * time.Second},
		{name: "capped", pods: []*v1.Pod{failedAt("a", 0), failedAt("b", 0), failedAt("c", 0), failedAt("d", 0), failedAt("e", 0), failedAt("f", 0), failedAt("g", 0)}, want: 6 * time.Minute},
		{name: "elapsed", pods: []*v1.Pod{failedAt("a", 0)}, now: time.Minute, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := backoffLeft(tc.pods, makeJob("ns", "j", nil), t0.Add(tc.now)); got != tc.want {
				t.Errorf("backoffLeft = %v, want %v", got, tc.want)
			}
		})
	}
}
