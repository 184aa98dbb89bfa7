package scheduler

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8stesting "k8s.io/client-go/testing"
)

const foo = "example.com/foo"

// withFoo gives a node n units of the extended resource foo.
func withFoo(n string) func(*v1.Node) {
	return func(node *v1.Node) { node.Status.Allocatable[foo] = resource.MustParse(n) }
}

// prio sets a pod's priority.
func prio(p int32) func(*v1.Pod) {
	return func(pod *v1.Pod) { pod.Spec.Priority = &p }
}

// started sets a pod's start time, minutes after baseTime.
func started(minutes int) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Status.StartTime = &metav1.Time{Time: baseTime.Add(time.Duration(minutes) * time.Minute)}
	}
}

// labelled sets a pod's labels from key/value pairs.
func labelled(kv ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func nominatedTo(node string) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Status.NominatedNodeName = node }
}

// preemptedVictim marks a pod as the scheduler marks the victims it deletes.
func preemptedVictim(p *v1.Pod) {
	p.DeletionTimestamp = &metav1.Time{Time: baseTime}
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler,
	})
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPreemption(t *testing.T) {
	never := v1.PreemptNever
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "guard"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &intstr.IntOrString{IntVal: 1}, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}
	cases := []struct {
		name      string
		pod       *v1.Pod
		nodes     []*v1.Node
		bound     []*v1.Pod
		nominated []*v1.Pod
		pdbs      []*policyv1.PodDisruptionBudget
		// want is the scheduling result: a node name, or the error text.
		want        string
		wantNode    string
		wantVictims []string
		wantKeep    bool
	}{
		{
			// "validates basic preemption works": the node whose highest
			// victim priority is lowest loses only its low-priority pod.
			name:  "lowest victim priority wins",
			pod:   makePod("ns", "preemptor", chain(prio(1000), requests(foo, "2"))),
			nodes: []*v1.Node{makeNode("a", withFoo("5")), makeNode("b", withFoo("5"))},
			bound: []*v1.Pod{
				makePod("ns", "a-low", onNode("a", prio(1), requests(foo, "2"))),
				makePod("ns", "a-mid", onNode("a", prio(100), requests(foo, "2"))),
				makePod("ns", "b-mid1", onNode("b", prio(100), requests(foo, "2"))),
				makePod("ns", "b-mid2", onNode("b", prio(100), requests(foo, "2"))),
				makePod("ns", "dns", onNode("a", requests("cpu", "100m"))),
			},
			want:     "0/2 nodes are available: 2 Insufficient example.com/foo. preemption: found a potential placement for pod on node a, preempting 1 victims",
			wantNode: "a", wantVictims: []string{"a-low"},
		},
		{
			// "PreemptionExecutionPath": the most important pods are given
			// back first, so p3 stays and p1, p2 go although p3 alone
			// would free enough.
			name:  "reprieve from the most important",
			pod:   makePod("ns", "p4", chain(prio(4), requests(foo, "500"))),
			nodes: []*v1.Node{makeNode("a", withFoo("1000"))},
			bound: []*v1.Pod{
				makePod("ns", "p1", onNode("a", prio(1), requests(foo, "200"))),
				makePod("ns", "p2", onNode("a", prio(2), requests(foo, "300"))),
				makePod("ns", "p3", onNode("a", prio(3), requests(foo, "450"))),
			},
			want:     "0/1 nodes are available: 1 Insufficient example.com/foo. preemption: found a potential placement for pod on node a, preempting 2 victims",
			wantNode: "a", wantVictims: []string{"p2", "p1"},
		},
		{
			name:  "equal priority is no victim",
			pod:   makePod("ns", "p", requests(foo, "1")),
			nodes: []*v1.Node{makeNode("a", withFoo("1"))},
			bound: []*v1.Pod{makePod("ns", "x", onNode("a", requests(foo, "1")))},
			want:  "0/1 nodes are available: 1 Insufficient example.com/foo. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
		},
		{
			name:  "evicting every victim is not enough",
			pod:   makePod("ns", "p", chain(prio(10), requests(foo, "3"))),
			nodes: []*v1.Node{makeNode("a", withFoo("2")), makeNode("b", nil)},
			bound: []*v1.Pod{makePod("ns", "x", onNode("a", prio(1), requests(foo, "1")))},
			want: "0/2 nodes are available: 2 Insufficient example.com/foo. " +
				"preemption: 0/2 nodes are available: 1 Insufficient example.com/foo, 1 No preemption victims found for incoming pod.",
		},
		{
			name:     "preemptionPolicy Never",
			pod:      makePod("ns", "p", chain(prio(10), requests(foo, "1"), func(p *v1.Pod) { p.Spec.PreemptionPolicy = &never })),
			nodes:    []*v1.Node{makeNode("a", withFoo("1"))},
			bound:    []*v1.Pod{makePod("ns", "x", onNode("a", prio(1), requests(foo, "1")))},
			want:     "0/1 nodes are available: 1 Insufficient example.com/foo. preemption: not eligible due to preemptionPolicy=Never.",
			wantKeep: true,
		},
		{
			name:     "a victim still terminating on the nominated node",
			pod:      makePod("ns", "p", chain(prio(10), requests(foo, "1"), nominatedTo("a"))),
			nodes:    []*v1.Node{makeNode("a", withFoo("1"))},
			bound:    []*v1.Pod{makePod("ns", "x", onNode("a", prio(1), requests(foo, "1"), preemptedVictim))},
			want:     "0/1 nodes are available: 1 Insufficient example.com/foo. preemption: not eligible due to a terminating pod on the nominated node.",
			wantKeep: true,
		},
		{
			name:  "a nominated pod of higher priority keeps its room",
			pod:   makePod("ns", "rs-p1", chain(prio(1), requests(foo, "200"))),
			nodes: []*v1.Node{makeNode("a", withFoo("1000"))},
			bound: []*v1.Pod{makePod("ns", "p3", onNode("a", prio(3), requests(foo, "450")))},
			nominated: []*v1.Pod{
				makePod("ns", "p4", chain(prio(4), requests(foo, "500"), nominatedTo("a"))),
			},
			want: "0/1 nodes are available: 1 Insufficient example.com/foo. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
		},
		{
			name:  "a nominated pod of lower priority does not",
			pod:   makePod("ns", "p5", chain(prio(5), requests(foo, "500"))),
			nodes: []*v1.Node{makeNode("a", withFoo("1000"))},
			bound: []*v1.Pod{makePod("ns", "p3", onNode("a", prio(3), requests(foo, "450")))},
			nominated: []*v1.Pod{
				makePod("ns", "p4", chain(prio(4), requests(foo, "500"), nominatedTo("a"))),
			},
			want: "a",
		},
		{
			name:  "unresolvable nodes are not tried",
			pod:   makePod("ns", "p", chain(prio(10), requests(foo, "1"), func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} })),
			nodes: []*v1.Node{makeNode("a", withFoo("1"))},
			bound: []*v1.Pod{makePod("ns", "x", onNode("a", prio(1), requests(foo, "1")))},
			want: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. " +
				"preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
		},
		{
			name:  "a PodDisruptionBudget steers to the other node",
			pod:   makePod("ns", "p", chain(prio(10), requests(foo, "1"))),
			nodes: []*v1.Node{makeNode("a", withFoo("1")), makeNode("b", withFoo("1"))},
			bound: []*v1.Pod{
				makePod("ns", "guarded", onNode("a", prio(1), requests(foo, "1"), labelled("app", "guarded"))),
				makePod("ns", "free", onNode("b", prio(2), requests(foo, "1"), labelled("app", "free"))),
			},
			pdbs:     []*policyv1.PodDisruptionBudget{pdb},
			want:     "0/2 nodes are available: 2 Insufficient example.com/foo. preemption: found a potential placement for pod on node b, preempting 1 victims",
			wantNode: "b", wantVictims: []string{"free"},
		},
		{
			name:  "the same priorities: the younger victims",
			pod:   makePod("ns", "p", chain(prio(10), requests(foo, "1"))),
			nodes: []*v1.Node{makeNode("a", withFoo("1")), makeNode("b", withFoo("1"))},
			bound: []*v1.Pod{
				makePod("ns", "old", onNode("a", prio(1), requests(foo, "1"), started(1))),
				makePod("ns", "young", onNode("b", prio(1), requests(foo, "1"), started(5))),
			},
			want:     "0/2 nodes are available: 2 Insufficient example.com/foo. preemption: found a potential placement for pod on node b, preempting 1 victims",
			wantNode: "b", wantVictims: []string{"young"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSnapshot(tc.nodes, tc.bound)
			s.pdbs, s.now = tc.pdbs, baseTime.Add(time.Hour)
			for _, p := range tc.nominated {
				s.nominate(p, p.Status.NominatedNodeName)
			}
			node, err := schedule(tc.pod, s)
			got := node
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("result:\n got %q\nwant %q", got, tc.want)
			}
			fe, ok := err.(*fitError)
			if !ok {
				return
			}
			p := fe.preemption
			if p.node != tc.wantNode || p.keepNomination != tc.wantKeep {
				t.Errorf("preemption node %q keep %v, want %q keep %v", p.node, p.keepNomination, tc.wantNode, tc.wantKeep)
			}
			if diff := cmp.Diff(tc.wantVictims, names(p.victims)); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitByPDB(t *testing.T) {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, DisruptedPods: map[string]metav1.Time{"w0": {}}},
	}
	pods := []*v1.Pod{
		makePod("ns", "w0", labelled("app", "web")), // already counted as disrupted
		makePod("ns", "w1", labelled("app", "web")), // spends the one allowed
		makePod("ns", "w2", labelled("app", "web")), // violates
		makePod("other", "w3", labelled("app", "web")),
		makePod("ns", "plain", nil),
	}
	violating, nonViolating := splitByPDB(pods, []*policyv1.PodDisruptionBudget{pdb})
	if diff := cmp.Diff([]string{"w2"}, names(violating)); diff != "" {
		t.Errorf("violating (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"w0", "w1", "w3", "plain"}, names(nonViolating)); diff != "" {
		t.Errorf("non-violating (-want +got):\n%s", diff)
	}
}

// TestPreemptionEvictsVictim runs the whole path against the fake API: the
// victim is marked DisruptionTarget/PreemptionByScheduler, deleted and told
// by an event; the preemptor is nominated to the node, then bound there once
// the victim is gone.
func TestPreemptionEvictsVictim(t *testing.T) {
	h := start(t, true,
		makeNode("a", withFoo("1")),
		makePod("ns", "victim", onNode("a", prio(1), requests(foo, "1"))),
		makePod("ns", "preemptor", chain(prio(1000), requests(foo, "1"))),
	)
	want := []string{
		"Normal Preempted Preempted by pod ns-preemptor on node a",
		"Warning FailedScheduling 0/1 nodes are available: 1 Insufficient example.com/foo. preemption: found a potential placement for pod on node a, preempting 1 victims",
		"Normal Scheduled Successfully assigned ns/preemptor to a",
	}
	var got []string
	for range want {
		got = append(got, h.nextEvent(t))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	var marked *v1.Pod
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			if marked == nil {
				t.Fatal("victim deleted before it was marked")
			}
			break
		}
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetName() == "victim" && p.GetSubresource() == "status" {
			marked = &v1.Pod{}
			if err := json.Unmarshal(p.GetPatch(), marked); err != nil {
				t.Fatal(err)
			}
		}
	}
	if marked == nil || len(marked.Status.Conditions) != 1 {
		t.Fatalf("victim status patch = %+v, want one DisruptionTarget condition", marked)
	}
	c := marked.Status.Conditions[0]
	if c.Type != v1.DisruptionTarget || c.Status != v1.ConditionTrue || c.Reason != v1.PodReasonPreemptionByScheduler ||
		c.Message != "default-scheduler: preempting to accommodate a higher priority pod" {
		t.Errorf("victim condition %+v", c)
	}
	if _, err := h.client.Tracker().Get(podsGVR, "ns", "victim", metav1.GetOptions{}); err == nil {
		t.Error("victim not deleted")
	}
	p := h.pod(t, "ns", "preemptor")
	if p.Status.NominatedNodeName != "a" || p.Spec.NodeName != "a" {
		t.Errorf("preemptor nominated to %q, bound to %q; want a and a", p.Status.NominatedNodeName, p.Spec.NodeName)
	}
}
