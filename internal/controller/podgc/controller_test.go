package podgc

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func pod(name, node string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0)},
		Spec:       v1.PodSpec{NodeName: node},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func node(name string, ready bool, taints ...v1.Taint) *v1.Node {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.NodeSpec{Taints: taints},
		Status:     v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: st}}},
	}
}

func terminating(p *v1.Pod) { ts := metav1.NewTime(t0); p.DeletionTimestamp = &ts }
func phase(ph v1.PodPhase) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Status.Phase = ph }
}
func createdAt(d time.Duration) func(*v1.Pod) {
	return func(p *v1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(d)) }
}

var oos = v1.Taint{Key: v1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute}

func TestPlan(t *testing.T) {
	nodes := map[string]*v1.Node{"ready": node("ready", true), "down": node("down", false), "down-oos": node("down-oos", false, oos), "up-oos": node("up-oos", true, oos)}
	tests := []struct {
		name      string
		pods      []*v1.Pod
		missing   map[string]time.Time
		gone      map[string]bool
		threshold int
		want      []string
		recheck   []string
	}{
		{name: "healthy pods stay", pods: []*v1.Pod{pod("a", "ready"), pod("b", "down"), pod("c", "down", terminating), pod("d", "up-oos", terminating), pod("e", "")}},
		{name: "terminating on NotReady out-of-service node", pods: []*v1.Pod{pod("a", "down-oos", terminating), pod("b", "down-oos")},
			want: []string{"a out-of-service"}},
		{name: "unscheduled terminating", pods: []*v1.Pod{pod("a", "", terminating)}, want: []string{"a unscheduled-terminating"}},
		{name: "missing node in quarantine", pods: []*v1.Pod{pod("a", "gone")}},
		{name: "missing node past quarantine is rechecked", pods: []*v1.Pod{pod("a", "gone"), pod("b", "gone")},
			missing: map[string]time.Time{"gone": t0.Add(-10 * time.Second)}, recheck: []string{"gone"}},
		{name: "confirmed gone", pods: []*v1.Pod{pod("a", "gone"), pod("b", "gone", terminating), pod("c", "ready")},
			missing: map[string]time.Time{"gone": t0.Add(-10 * time.Second)}, gone: map[string]bool{"gone": true},
			want: []string{"a orphaned", "b orphaned"}},
		{name: "terminated beyond threshold, oldest first", threshold: 2, pods: []*v1.Pod{
			pod("new", "ready", phase(v1.PodSucceeded), createdAt(3*time.Second)),
			pod("old", "ready", phase(v1.PodFailed), createdAt(1*time.Second)),
			pod("mid", "ready", phase(v1.PodSucceeded), createdAt(2*time.Second)),
			pod("oldest", "ready", phase(v1.PodSucceeded)),
			pod("running", "ready", createdAt(-time.Hour)),
		}, want: []string{"oldest terminated", "old terminated"}},
		{name: "threshold disabled", threshold: -1, pods: []*v1.Pod{pod("a", "ready", phase(v1.PodSucceeded))}},
		{name: "one reason per pod", threshold: 1, pods: []*v1.Pod{pod("a", "", phase(v1.PodFailed), terminating), pod("b", "", phase(v1.PodFailed), createdAt(time.Second))},
			want: []string{"a terminated"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := plan(snapshot{pods: tc.pods, nodes: nodes, missingSince: tc.missing, gone: tc.gone, threshold: tc.threshold, now: t0}, 5*time.Second)
			var got []string
			for _, v := range d.victims {
				got = append(got, v.pod.Name+" "+v.reason.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.recheck, d.recheck); diff != "" {
				t.Errorf("recheck (-want +got):\n%s", diff)
			}
		})
	}
}

// A pod on a removed node goes after the quarantine, once the API server
// confirms the node is gone: Failed with DisruptionTarget, then a forced
// delete. A node only missing from the cache (informer lag) keeps its pods.
func TestOrphanedPods(t *testing.T) {
	lagging := node("lagging", true)
	orphan := pod("orphan", "removed")
	kept := pod("kept", "lagging")
	client := kubefake.NewClientset(orphan, kept, lagging)
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := clocktesting.NewFakeClock(t0)
	c := New(Config{Client: client, Informers: factory, Clock: clk})
	for _, p := range []*v1.Pod{orphan, kept} {
		if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := c.pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got := actions(client); len(got) != 0 {
		t.Fatalf("actions during quarantine: %v", got)
	}
	clk.Step(DefaultQuarantine)
	if err := c.pass(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"get nodes lagging", "get nodes removed", "patch pods/status orphan", "delete pods orphan"}
	if diff := cmp.Diff(want, actions(client)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	for _, a := range client.Actions() {
		switch a := a.(type) {
		case clienttesting.PatchActionImpl:
			var p struct {
				Status v1.PodStatus `json:"status"`
			}
			if err := json.Unmarshal(a.GetPatch(), &p); err != nil {
				t.Fatal(err)
			}
			if p.Status.Phase != v1.PodFailed || len(p.Status.Conditions) != 1 {
				t.Fatalf("status patch %s", a.GetPatch())
			}
			c := p.Status.Conditions[0]
			if c.Type != v1.DisruptionTarget || c.Status != v1.ConditionTrue || c.Reason != "DeletionByPodGC" || c.Message != "PodGC: node no longer exists" {
				t.Errorf("condition %+v", c)
			}
		case clienttesting.DeleteActionImpl:
			if g := a.GetDeleteOptions().GracePeriodSeconds; g == nil || *g != 0 {
				t.Errorf("delete grace period %v, want 0", g)
			}
		}
	}
}

// Terminated pods beyond the threshold are deleted without a status write;
// a running pod marked for collection is first set Failed.
func TestCollectWrites(t *testing.T) {
	done := pod("done", "n", phase(v1.PodSucceeded))
	stuck := pod("stuck", "", terminating)
	client := kubefake.NewClientset(done, stuck)
	c := New(Config{Client: client, Informers: informers.NewSharedInformerFactory(client, 0), Clock: clocktesting.NewFakeClock(t0)})
	ctx := context.Background()
	if err := c.collect(ctx, victim{pod: done, reason: terminated}, t0); err != nil {
		t.Fatal(err)
	}
	if err := c.collect(ctx, victim{pod: stuck, reason: unscheduledTerminating}, t0); err != nil {
		t.Fatal(err)
	}
	want := []string{"delete pods done", "patch pods/status stuck", "delete pods stuck"}
	if diff := cmp.Diff(want, actions(client)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	patch := string(client.Actions()[1].(clienttesting.PatchActionImpl).GetPatch())
	if patch != `{"status":{"phase":"Failed"}}` {
		t.Errorf("patch %s", patch)
	}
}

func actions(client *kubefake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		name := ""
		switch a := a.(type) {
		case clienttesting.GetActionImpl:
			name = a.GetName()
		case clienttesting.PatchActionImpl:
			name = a.GetName()
		case clienttesting.DeleteActionImpl:
			name = a.GetName()
		}
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		out = append(out, fmt.Sprintf("%s %s %s", a.GetVerb(), res, name))
	}
	return out
}

// A node's deletion brings the pass one quarantine later, not a period later.
func TestRunAfterNodeDeletion(t *testing.T) {
	orphan := pod("orphan", "removed")
	client := kubefake.NewClientset(orphan)
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := clocktesting.NewFakeClock(t0)
	c := New(Config{Client: client, Informers: factory, Clock: clk, Period: time.Hour})
	c.synced = nil // the caches are filled by hand
	if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(orphan); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; actions %v", what, actions(client))
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("the ticker", clk.HasWaiters)
	c.nodeDeleted(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "removed"}})
	// The ticker and the quarantine timer.
	waitFor("the quarantine timer", func() bool { return clk.Waiters() == 2 })
	clk.Step(DefaultQuarantine + 100*time.Millisecond)
	want := []string{"get nodes removed", "patch pods/status orphan", "delete pods orphan"}
	waitFor("the orphan's deletion", func() bool { return len(actions(client)) == len(want) })
	if diff := cmp.Diff(want, actions(client)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}
