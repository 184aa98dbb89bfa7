package netpolwatch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

func policy(ns, name string, sel map[string]string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}},
	}
}

func pod(ns, name string, lbls map[string]string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}, Status: v1.PodStatus{Phase: v1.PodRunning}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// fixture is a controller on a fake clientset whose syncs the test calls itself.
type fixture struct {
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	events *record.FakeRecorder
	c      *Controller
}

func newFixture(t testing.TB, objs ...runtime.Object) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	fx := &fixture{client: client, clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), events: record.NewFakeRecorder(100)}
	fx.c = New(Config{Informers: f, Recorder: fx.events, Clock: fx.clock})
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), fx.c.synced...) {
		t.Fatal("caches did not sync")
	}
	return fx
}

// drain returns the events recorded so far.
func (fx *fixture) drain() []string {
	var out []string
	for {
		select {
		case e := <-fx.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (fx *fixture) sync(t *testing.T, key string) {
	t.Helper()
	if err := fx.c.sync(context.Background(), key); err != nil {
		t.Fatalf("sync %s: %v", key, err)
	}
}

// waitPods waits until the pod cache of ns holds n pods.
func (fx *fixture) waitPods(t testing.TB, ns string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pods, _ := fx.c.pods.ByIndex(cache.NamespaceIndex, ns)
		if len(pods) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod cache of %s has %d pods, want %d", ns, len(pods), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle waits until the informers have handed the controller every initial object and
// empties its queue, so that the benchmark times only its own events.
func settle(c *Controller) {
	for quiet := 0; quiet < 3; {
		if c.queue.Len() == 0 {
			quiet++
		} else {
			quiet = 0
		}
		for c.queue.Len() > 0 {
			key, _ := c.queue.Get()
			c.queue.Done(key)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const want = `Warning NoPodsSelected podSelector "app=web" selects no pod in namespace "x"`

func TestNoPodsSelectedOncePerTransition(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, policy("x", "web", map[string]string{"app": "web"}), pod("x", "db", map[string]string{"app": "db"}),
		pod("y", "web", map[string]string{"app": "web"}))

	fx.sync(t, "x/web")
	if got := fx.drain(); len(got) != 0 {
		t.Fatalf("reported within the grace period: %v", got)
	}
	fx.clock.Step(DefaultGrace)
	fx.sync(t, "x/web")
	if diff := cmp.Diff([]string{want}, fx.drain()); diff != "" {
		t.Fatalf("events after the grace period (-want +got):\n%s", diff)
	}
	fx.clock.Step(time.Hour)
	fx.sync(t, "x/web")
	if got := fx.drain(); len(got) != 0 {
		t.Fatalf("reported again on a resync: %v", got)
	}

	if _, err := fx.client.CoreV1().Pods("x").Create(ctx, pod("x", "web-1", map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fx.waitPods(t, "x", 2)
	if fx.c.queue.Len() == 0 {
		t.Error("a new pod did not requeue the policies of its namespace")
	}
	fx.sync(t, "x/web")
	if got := fx.drain(); len(got) != 0 {
		t.Fatalf("an event when the policy selects again: %v", got)
	}

	if err := fx.client.CoreV1().Pods("x").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fx.waitPods(t, "x", 1)
	fx.sync(t, "x/web")
	fx.clock.Step(DefaultGrace)
	fx.sync(t, "x/web")
	if diff := cmp.Diff([]string{want}, fx.drain()); diff != "" {
		t.Fatalf("events after the selection emptied again (-want +got):\n%s", diff)
	}
}

func TestPodsThatKeepAPolicyQuiet(t *testing.T) {
	succeeded := func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }
	fx := newFixture(t,
		policy("x", "web", map[string]string{"app": "web"}), pod("x", "web", map[string]string{"app": "web"}),
		policy("x", "all", nil), // selects the db pod too
		policy("x", "done", map[string]string{"app": "job"}), pod("x", "job", map[string]string{"app": "job"}, succeeded),
		policy("empty", "all", nil),
	)
	for _, key := range []string{"x/web", "x/all", "x/done", "empty/all"} {
		fx.sync(t, key)
	}
	fx.clock.Step(DefaultGrace)
	for _, key := range []string{"x/web", "x/all", "x/done", "empty/all"} {
		fx.sync(t, key)
	}
	wantEvents := []string{
		`Warning NoPodsSelected podSelector "app=job" selects no pod in namespace "x"`,
		`Warning NoPodsSelected podSelector {} selects every pod, and namespace "empty" has none`,
	}
	if diff := cmp.Diff(wantEvents, fx.drain()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestRunRecordsTheEvent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(policy("x", "web", map[string]string{"app": "web"}))
	f := informers.NewSharedInformerFactory(client, 0)
	events := record.NewFakeRecorder(10)
	c := New(Config{Informers: f, Recorder: events, Grace: 10 * time.Millisecond})
	f.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 1); close(done) }()
	select {
	case e := <-events.Events:
		if e != want {
			t.Errorf("event %q, want %q", e, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no NoPodsSelected event")
	}
	cancel()
	<-done
}

func TestPodEventRequeuesOnlyPoliciesItConcerns(t *testing.T) {
	fx := newFixture(t, policy("x", "web", map[string]string{"app": "web"}), policy("x", "db", map[string]string{"app": "db"}),
		policy("y", "web", map[string]string{"app": "web"}))
	settle(fx.c)
	web, db := pod("x", "p", map[string]string{"app": "web"}), pod("x", "p", map[string]string{"app": "db"})
	done := pod("x", "p", map[string]string{"app": "web"}, func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded })
	tests := []struct {
		name     string
		old, cur *v1.Pod
		want     []string
	}{
		{name: "added", cur: web, want: []string{"x/web"}},
		{name: "deleted", old: db, want: []string{"x/db"}},
		{name: "relabelled", old: web, cur: db, want: []string{"x/db", "x/web"}},
		{name: "status change only", old: web, cur: web.DeepCopy()},
		{name: "terminated", old: web, cur: done, want: []string{"x/web"}},
		{name: "selected by none", cur: pod("x", "p", map[string]string{"app": "cache"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var old, cur any
			if tc.old != nil {
				old = tc.old
			}
			if tc.cur != nil {
				cur = tc.cur
			}
			fx.c.podChanged(old, cur)
			var got []string
			for fx.c.queue.Len() > 0 {
				key, _ := fx.c.queue.Get()
				got = append(got, key)
				fx.c.queue.Done(key)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("requeued (-want +got):\n%s", diff)
			}
		})
	}
}
