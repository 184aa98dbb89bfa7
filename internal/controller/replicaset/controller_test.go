package replicaset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// fixture is a controller over a fake clientset whose informers are not
// started: tests put objects into the caches themselves, which is how
// informer lag is simulated.
type fixture struct {
	c        *Controller
	client   *kubefake.Clientset
	factory  informers.SharedInformerFactory
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := kubefake.NewClientset(objs...)
	var seq atomic.Int32
	// The fake tracker does not implement generateName; the API server does.
	client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		pod := action.(clienttesting.CreateAction).GetObject().(*v1.Pod)
		if pod.Name == "" {
			pod.Name = fmt.Sprintf("%sx%04d", pod.GenerateName, seq.Add(1))
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	f := &fixture{
		client:   client,
		factory:  factory,
		recorder: record.NewFakeRecorder(100),
		clock:    clocktesting.NewFakeClock(t0),
	}
	f.c = New(Config{Client: client, Informers: factory, Recorder: f.recorder, Clock: f.clock})
	for _, obj := range objs {
		f.cache(t, obj)
	}
	return f
}

// cache puts obj into the controller's informer cache, as a watch would.
func (f *fixture) cache(t *testing.T, obj runtime.Object) {
	t.Helper()
	var err error
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		err = f.factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
	case *v1.Pod:
		err = f.factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// actions returns the fake client's writes as "verb resource[/sub] name".
func (f *fixture) actions() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		name := ""
		switch a := a.(type) {
		case clienttesting.CreateActionImpl:
			name = a.GetObject().(metav1.Object).GetGenerateName()
		case clienttesting.DeleteActionImpl:
			name = a.GetName()
		case clienttesting.PatchActionImpl:
			name = a.GetName()
		case clienttesting.UpdateActionImpl:
			name = a.GetObject().(metav1.Object).GetName()
		}
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		out = append(out, a.GetVerb()+" "+res+" "+name)
	}
	return out
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) pods(t *testing.T) []*v1.Pod {
	t.Helper()
	list, err := f.client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*v1.Pod
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out
}

func (f *fixture) rs(t *testing.T, name string) *appsv1.ReplicaSet {
	t.Helper()
	rs, err := f.client.AppsV1().ReplicaSets("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestScaleUpUnderInformerLag(t *testing.T) {
	rs := makeRS("web", 3)
	f := newFixture(t, rs)
	ctx := context.Background()
	if err := f.c.sync(ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	// The cache has not seen the three pods yet: a second sync must wait.
	if err := f.c.sync(ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	// Status writes repeat (the cache also lags on the ReplicaSet); creates must not.
	want := []string{"create pods web-", "create pods web-", "create pods web-"}
	creates := slices.DeleteFunc(f.actions(), func(s string) bool { return !strings.HasPrefix(s, "create") })
	if diff := cmp.Diff(want, creates); diff != "" {
		t.Fatalf("actions (-want +got):\n%s", diff)
	}
	if got := f.rs(t, "web").Status.Replicas; got != 0 {
		t.Errorf("status.replicas=%d before the cache saw any pod", got)
	}
	for _, pod := range f.pods(t) {
		f.cache(t, pod)
		f.c.addPod(pod)
	}
	f.client.ClearActions()
	f.cache(t, f.rs(t, "web"))
	if err := f.c.sync(ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"update replicasets/status web"}, f.actions()); diff != "" {
		t.Errorf("actions once the cache caught up (-want +got):\n%s", diff)
	}
	st := f.rs(t, "web").Status
	if st.Replicas != 3 || st.FullyLabeledReplicas != 3 || st.ObservedGeneration != 1 {
		t.Errorf("status %+v", st)
	}
	events := f.events()
	if len(events) != 3 || !strings.HasPrefix(events[0], "Normal SuccessfulCreate Created pod: web-") {
		t.Errorf("events %q", events)
	}
	for _, pod := range f.pods(t) {
		ref := metav1.GetControllerOf(pod)
		if ref == nil || ref.UID != rs.UID || pod.Labels["app"] != "web" {
			t.Errorf("pod %s: labels %v controller %+v", pod.Name, pod.Labels, ref)
		}
	}
}

func TestExpectationsExpire(t *testing.T) {
	f := newFixture(t, makeRS("web", 2))
	ctx := context.Background()
	if err := f.c.sync(ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	f.clock.Step(expectationsTTL + time.Second)
	// The creations were never observed; after the TTL the controller
	// trusts its cache again and creates.
	if err := f.c.sync(ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(f.actions(), "\n"), "create pods"); n != 2 {
		t.Errorf("%d creates after expiry, want 2: %q", n, f.actions())
	}
}

func TestScaleDownDeletesTheRightPods(t *testing.T) {
	rs := makeRS("web", 1, func(rs *appsv1.ReplicaSet) { rs.Status.Replicas = 3 })
	objs := []runtime.Object{
		rs,
		makePod("web-ready", rs),
		makePod("web-unready", rs, notReady),
		makePod("web-pending", rs, pending),
	}
	f := newFixture(t, objs...)
	ctx := context.Background()
	if err := f.c.sync(ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, a := range f.actions() {
		if strings.HasPrefix(a, "delete pods ") {
			deleted = append(deleted, strings.TrimPrefix(a, "delete pods "))
		}
	}
	slices.Sort(deleted)
	if diff := cmp.Diff([]string{"web-pending", "web-unready"}, deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	events := f.events()
	slices.Sort(events)
	wantEvents := []string{"Normal SuccessfulDelete Deleted pod: web-pending", "Normal SuccessfulDelete Deleted pod: web-unready"}
	if diff := cmp.Diff(wantEvents, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// Until the informer reports the deletions, nothing more is deleted.
	f.client.ClearActions()
	if err := f.c.sync(ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	if a := f.actions(); slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "delete") }) {
		t.Errorf("deleted again under informer lag: %q", a)
	}
}

func TestCreateFailureBacksOff(t *testing.T) {
	f := newFixture(t, makeRS("web", 5))
	f.client.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("exceeded quota")
	})
	err := f.c.sync(context.Background(), "ns/web")
	if err == nil {
		t.Fatal("sync succeeded although every create fails")
	}
	if n := strings.Count(strings.Join(f.actions(), "\n"), "create pods"); n != 1 {
		t.Errorf("%d create attempts, want 1 (slow start)", n)
	}
	if diff := cmp.Diff([]string{"Warning FailedCreate Error creating: exceeded quota"}, f.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	conds := f.rs(t, "web").Status.Conditions
	if len(conds) != 1 || conds[0].Type != appsv1.ReplicaSetReplicaFailure || conds[0].Reason != "FailedCreate" || conds[0].Message != "exceeded quota" {
		t.Errorf("conditions %+v", conds)
	}
	// The failed creates were never issued: expectations allow a retry.
	if !f.c.expectations.satisfied("ns/web") {
		t.Error("expectations still pending after failed creates")
	}
}

func TestAdoptAndRelease(t *testing.T) {
	rs := makeRS("web", 2)
	orphan := makePod("orphan", nil, func(p *v1.Pod) { p.Labels = map[string]string{"app": "web"} })
	moved := makePod("moved", rs, func(p *v1.Pod) { p.Labels = map[string]string{"app": "other"} })
	f := newFixture(t, rs, orphan, moved, makePod("mine", rs))
	if err := f.c.sync(context.Background(), "ns/web"); err != nil {
		t.Fatal(err)
	}
	want := []string{"patch pods orphan", "patch pods moved", "update replicasets/status web"}
	if diff := cmp.Diff(want, f.actions()); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	for _, pod := range f.pods(t) {
		ref := metav1.GetControllerOf(pod)
		switch pod.Name {
		case "orphan", "mine":
			if ref == nil || ref.UID != rs.UID {
				t.Errorf("%s: controller %+v, want the ReplicaSet", pod.Name, ref)
			}
		case "moved":
			if ref != nil {
				t.Errorf("moved: still controlled by %+v", ref)
			}
		}
	}
	if st := f.rs(t, "web").Status; st.Replicas != 2 {
		t.Errorf("status.replicas=%d, want 2 (mine + adopted)", st.Replicas)
	}
}

func TestTerminatingReplicas(t *testing.T) {
	rs := makeRS("web", 1)
	dying := makePod("dying", rs, func(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} })
	f := newFixture(t, rs, makePod("live", rs), dying)
	if err := f.c.sync(context.Background(), "ns/web"); err != nil {
		t.Fatal(err)
	}
	st := f.rs(t, "web").Status
	if st.Replicas != 1 || st.TerminatingReplicas == nil || *st.TerminatingReplicas != 1 {
		t.Errorf("status %+v, want 1 replica and 1 terminating", st)
	}
	if slices.ContainsFunc(f.actions(), func(s string) bool { return strings.HasPrefix(s, "create") }) {
		t.Errorf("replaced a terminating pod that is already replaced: %q", f.actions())
	}
}

// TestRun drives the controller through real (fake-backed) informers.
func TestRun(t *testing.T) {
	client := kubefake.NewClientset()
	var seq atomic.Int32
	client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		pod := action.(clienttesting.CreateAction).GetObject().(*v1.Pod)
		pod.Name = fmt.Sprintf("%sx%04d", pod.GenerateName, seq.Add(1))
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(Config{Client: client, Informers: factory})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	defer func() { cancel(); <-done }()
	if _, err := client.AppsV1().ReplicaSets("ns").Create(ctx, makeRS("web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs, err := client.AppsV1().ReplicaSets("ns").Get(ctx, "web", metav1.GetOptions{})
		if err == nil && rs.Status.Replicas == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never reached 3 replicas: %+v", rs.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := seq.Load(); n != 3 {
		t.Errorf("%d pods created, want 3", n)
	}
}
