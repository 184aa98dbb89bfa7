package nodelifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tranche/tranche/internal/testutil"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
)

// fixture is a controller over a fake clientset and a fake clock at t0,
// with its informers running.
type fixture struct {
	c        *Controller
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	clock    *testingclock.FakeClock
	recorder *record.FakeRecorder
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{
		client:   fake.NewClientset(objs...),
		clock:    testingclock.NewFakeClock(t0),
		recorder: record.NewFakeRecorder(100),
	}
	f.factory = informers.NewSharedInformerFactory(f.client, 0)
	// The tests' grace period is set, not the default, so that they keep their figures
	// when the default follows Kubernetes'.
	f.c = New(Config{Client: f.client, Informers: f.factory, Clock: f.clock, Recorder: f.recorder, GracePeriod: grace})
	f.factory.Start(ctx.Done())
	f.factory.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() {
		cancel()
		f.factory.Shutdown()
	})
	return f
}

// startMonitoring stands in for Run's start when tests drive the passes.
func (f *fixture) startMonitoring(t *testing.T) {
	f.c.started = f.clock.Now()
	t.Cleanup(f.c.evictQueue.ShutDown)
}

// writes returns the fake client's writes since the last call, as
// "verb resource[/subresource] [ns/]name", and forgets them.
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		name := ""
		switch a := a.(type) {
		case clienttesting.UpdateAction:
			name = a.GetObject().(metav1.Object).GetName()
		case clienttesting.PatchAction:
			name = a.GetName()
		case clienttesting.DeleteAction:
			name = a.GetName()
		default:
			continue
		}
		if ns := a.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		out = append(out, a.GetVerb()+" "+res+" "+name)
	}
	f.client.ClearActions()
	return out
}

// events drains the recorded events.
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

func (f *fixture) node(t *testing.T, name string) *v1.Node {
	t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pod returns the named pod in default, or nil once it is gone.
func (f *fixture) pod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	p, err := f.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func check(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("%s (-want +got):\n%s", what, d)
	}
}

func readyPod(name, node string, mutate func(*v1.Pod)) *v1.Pod {
	return makePod(name, func(p *v1.Pod) {
		p.Spec.NodeName = node
		p.Status.Conditions = []v1.PodCondition{
			{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: at(-time.Hour)},
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: at(-time.Hour)},
		}
		if mutate != nil {
			mutate(p)
		}
	})
}

func podReady(p *v1.Pod) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status
		}
	}
	return ""
}

func TestSilentNodeTurnsUnknownAndRecovers(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t,
		makeNode("n", withConditions(healthy(0))),
		makeLease("n", 0),
		readyPod("web", "n", nil),
		readyPod("elsewhere", "m", nil),
	)
	f.startMonitoring(t)

	f.clock.SetTime(t0.Add(39 * time.Second))
	f.c.monitor(ctx)
	check(t, "writes at 39s", []string(nil), f.writes())

	f.clock.SetTime(t0.Add(41 * time.Second))
	f.c.monitor(ctx)
	check(t, "writes at 41s", []string{"update nodes/status n", "update nodes n", "update pods/status default/web"}, f.writes())
	check(t, "events at 41s", []string{
		"Normal NodeNotReady Node n status is now: NodeNotReady",
		"Warning NodeNotReady Node is not ready",
	}, f.events())
	node := f.node(t, "n")
	ready := findCondition(node.Status.Conditions, v1.NodeReady)
	check(t, "Ready", v1.NodeCondition{
		Type: v1.NodeReady, Status: v1.ConditionUnknown, Reason: "NodeStatusUnknown",
		Message: "Kubelet stopped posting node status.", LastHeartbeatTime: at(0), LastTransitionTime: at(41 * time.Second),
	}, *ready)
	check(t, "taints", []v1.Taint{
		taint(v1.TaintNodeUnreachable, v1.TaintEffectNoSchedule, atp(41*time.Second)),
		taint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, atp(41*time.Second)),
	}, node.Spec.Taints)
	check(t, "web Ready", v1.ConditionFalse, podReady(f.pod(t, "web")))
	check(t, "elsewhere Ready", v1.ConditionTrue, podReady(f.pod(t, "elsewhere")))

	testutil.Eventually(t, 5*time.Second, "the caches to catch up", func() bool {
		n, _ := f.c.nodes.Get("n")
		pods := f.c.podsOn("n")
		return n != nil && len(n.Spec.Taints) == 2 && len(pods) == 1 && podReady(pods[0]) == v1.ConditionFalse
	})
	f.clock.SetTime(t0.Add(46 * time.Second))
	f.c.monitor(ctx)
	check(t, "writes on the next pass", []string(nil), f.writes())
	check(t, "events on the next pass", []string(nil), f.events())

	// The kubelet comes back: it renews its lease and, seeing Unknown on
	// the server, posts its conditions again.
	lease := makeLease("n", 50*time.Second)
	if _, err := f.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	node = f.node(t, "n")
	node.Status.Conditions = healthy(50 * time.Second)
	if _, err := f.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the kubelet's status in the cache", func() bool {
		n, _ := f.c.nodes.Get("n")
		return n != nil && readyStatus(n.Status.Conditions) == v1.ConditionTrue
	})
	f.writes()
	f.clock.SetTime(t0.Add(51 * time.Second))
	f.c.monitor(ctx)
	check(t, "writes after recovery", []string{"update nodes n"}, f.writes())
	check(t, "taints after recovery", []v1.Taint(nil), f.node(t, "n").Spec.Taints)
}

func TestStaleNodesGetAGracePeriodFromStart(t *testing.T) {
	f := newFixture(t, makeNode("n", withConditions(healthy(-time.Hour))), makeLease("n", -time.Hour))
	f.startMonitoring(t)
	f.clock.SetTime(t0.Add(40 * time.Second))
	f.c.monitor(context.Background())
	check(t, "writes within the start-up grace", []string(nil), f.writes())
	f.clock.SetTime(t0.Add(41 * time.Second))
	f.c.monitor(context.Background())
	check(t, "writes after it", []string{"update nodes/status n", "update nodes n"}, f.writes())
}

func TestTaintEviction(t *testing.T) {
	ctx := context.Background()
	tainted := makeNode("n", func(n *v1.Node) {
		n.Spec.Taints = []v1.Taint{taint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, atp(0))}
	})
	f := newFixture(t, tainted,
		readyPod("intolerant", "n", nil),
		readyPod("five-minutes", "n", tolerate(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, seconds(300))),
		readyPod("ten-minutes", "n", tolerate(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, seconds(600))),
		readyPod("forever", "n", tolerate(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, nil)),
	)
	f.startMonitoring(t)

	if err := f.c.syncEvictions(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	check(t, "writes at 0s", []string{"patch pods/status default/intolerant", "delete pods default/intolerant"}, f.writes())
	check(t, "events at 0s", []string{"Normal TaintManagerEviction Marking for deletion Pod default/intolerant"}, f.events())

	f.clock.SetTime(t0.Add(299 * time.Second))
	if err := f.c.syncEvictions(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	check(t, "writes at 299s", []string(nil), f.writes())
	if f.pod(t, "five-minutes") == nil {
		t.Fatal("five-minutes deleted before its 300s")
	}

	f.clock.SetTime(t0.Add(300 * time.Second))
	if err := f.c.syncEvictions(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	check(t, "writes at 300s", []string{"patch pods/status default/five-minutes", "delete pods default/five-minutes"}, f.writes())
	check(t, "events at 300s", []string{"Normal TaintManagerEviction Marking for deletion Pod default/five-minutes"}, f.events())

	// The node recovers before ten-minutes' time is up.
	node := f.node(t, "n")
	node.Spec.Taints = nil
	if _, err := f.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the untainted node and the deletions in the cache", func() bool {
		n, _ := f.c.nodes.Get("n")
		return n != nil && len(n.Spec.Taints) == 0 && len(f.c.podsOn("n")) == 2
	})
	f.writes()
	if err := f.c.syncEvictions(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	check(t, "writes after recovery", []string(nil), f.writes())
	check(t, "events after recovery", []string{"Normal TaintManagerEviction Cancelling deletion of Pod default/ten-minutes"}, f.events())
	for _, name := range []string{"ten-minutes", "forever"} {
		if f.pod(t, name) == nil {
			t.Errorf("%s was deleted", name)
		}
	}
}

func TestTaintWithoutTimeAddedCountsFromFirstSight(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t,
		makeNode("n", func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoExecute}}
		}),
		readyPod("p", "n", tolerate("maintenance", "", seconds(60))),
	)
	f.startMonitoring(t)
	for _, s := range []time.Duration{10, 30, 69} {
		f.clock.SetTime(t0.Add(s * time.Second))
		if err := f.c.syncEvictions(ctx, "n"); err != nil {
			t.Fatal(err)
		}
		if s == 10 {
			continue
		}
		check(t, fmt.Sprintf("writes at %ds", s), []string(nil), f.writes())
	}
	f.clock.SetTime(t0.Add(70 * time.Second))
	if err := f.c.syncEvictions(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	check(t, "writes at 70s", []string{"patch pods/status default/p", "delete pods default/p"}, f.writes())
}

// TestRun drives the whole controller with the fake clock: a node whose
// lease stops is tainted, its intolerant pod goes at once and the pod that
// tolerates unreachable for 300 s goes once that time is up.
func TestRun(t *testing.T) {
	f := newFixture(t,
		makeNode("n", withConditions(healthy(0))),
		makeLease("n", 0),
		readyPod("intolerant", "n", nil),
		readyPod("five-minutes", "n", tolerate(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, seconds(300))),
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	// stepUntil advances the fake clock a second at a time until cond
	// holds, giving the controller's goroutines a moment after each step.
	stepUntil := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		for !cond() {
			if f.clock.Since(t0) > limit {
				t.Fatalf("%s did not happen by %v", what, limit)
			}
			f.clock.Step(time.Second)
			time.Sleep(time.Millisecond)
		}
	}
	var tainted time.Time
	stepUntil("unreachable taint", 120*time.Second, func() bool {
		for _, tn := range f.node(t, "n").Spec.Taints {
			if tn.Key == v1.TaintNodeUnreachable && tn.Effect == v1.TaintEffectNoExecute {
				tainted = tn.TimeAdded.Time
				return true
			}
		}
		return false
	})
	if d := tainted.Sub(t0); d <= 40*time.Second {
		t.Fatalf("tainted %v after the last heartbeat, within the grace period", d)
	}
	testutil.Eventually(t, 5*time.Second, "the intolerant pod's deletion", func() bool { return f.pod(t, "intolerant") == nil })
	if f.pod(t, "five-minutes") == nil {
		t.Fatal("five-minutes deleted at once")
	}
	stepUntil("five-minutes' deletion", tainted.Sub(t0)+400*time.Second, func() bool { return f.pod(t, "five-minutes") == nil })
	if now := f.clock.Now(); now.Before(tainted.Add(300 * time.Second)) {
		t.Fatalf("five-minutes deleted %v after the taint", now.Sub(tainted))
	}
}

// TestDefaultGracePeriod: without a grace period the controller uses
// kube-controller-manager's --node-monitor-grace-period default, 50 s since 1.32, and
// its 5 s --node-monitor-period.
func TestDefaultGracePeriod(t *testing.T) {
	client := fake.NewClientset()
	c := New(Config{Client: client, Informers: informers.NewSharedInformerFactory(client, 0)})
	defer c.evictQueue.ShutDown()
	if c.grace != 50*time.Second || c.period != 5*time.Second {
		t.Fatalf("grace %s, period %s: want 50s and 5s", c.grace, c.period)
	}
}
