package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestSchedule(t *testing.T) {
	never := v1.PreemptNever
	threeNodes := []*v1.Node{
		makeNode("a", zone("z1")), makeNode("b", zone("z1")), makeNode("c", zone("z2")),
	}
	cases := []struct {
		name    string
		pod     *v1.Pod
		nodes   []*v1.Node
		bound   []*v1.Pod
		want    string
		wantErr string
	}{
		{
			name:  "empty cluster ties break by name",
			pod:   makePod("ns", "p", ownedBy("rs")),
			nodes: threeNodes, want: "a",
		},
		{
			name:  "second replica goes to the other zone",
			pod:   makePod("ns", "p", ownedBy("rs")),
			nodes: threeNodes,
			bound: []*v1.Pod{makePod("ns", "r1", onNode("a", ownedBy("rs")))},
			want:  "c",
		},
		{
			name:  "third replica takes the free node of the first zone",
			pod:   makePod("ns", "p", ownedBy("rs")),
			nodes: threeNodes,
			bound: []*v1.Pod{
				makePod("ns", "r1", onNode("a", ownedBy("rs"))),
				makePod("ns", "r2", onNode("c", ownedBy("rs"))),
			},
			want: "b",
		},
		{
			name:  "other workloads do not count for spreading but for load",
			pod:   makePod("ns", "p", ownedBy("rs")),
			nodes: threeNodes,
			bound: []*v1.Pod{
				makePod("ns", "x1", onNode("a", ownedBy("other"), requests("cpu", "1"))),
				makePod("other", "r1", onNode("c", ownedBy("rs"))),
			},
			want: "b",
		},
		{
			name:  "pods without controller spread by equal labels",
			pod:   makePod("ns", "p", func(p *v1.Pod) { p.Labels = map[string]string{"app": "web"} }),
			nodes: []*v1.Node{makeNode("a", nil), makeNode("b", nil)},
			bound: []*v1.Pod{makePod("ns", "w1", onNode("a", func(p *v1.Pod) { p.Labels = map[string]string{"app": "web"} }))},
			want:  "b",
		},
		{
			name:  "terminating siblings do not count",
			pod:   makePod("ns", "p", ownedBy("rs")),
			nodes: []*v1.Node{makeNode("a", nil), makeNode("b", nil)},
			bound: []*v1.Pod{
				makePod("ns", "r1", onNode("a", ownedBy("rs"), func(p *v1.Pod) { p.DeletionTimestamp = &p.CreationTimestamp })),
				makePod("ns", "x", onNode("b", requests("memory", "1Gi"))),
			},
			want: "a",
		},
		{
			name:  "least requested breaks a spreading tie",
			pod:   makePod("ns", "p", nil),
			nodes: []*v1.Node{makeNode("a", nil), makeNode("b", nil)},
			bound: []*v1.Pod{makePod("ns", "x", onNode("a", requests("cpu", "100m")))},
			want:  "b",
		},
		{
			name:  "filters before scores",
			pod:   makePod("ns", "p", ownedBy("rs")),
			nodes: []*v1.Node{makeNode("a", nil), makeNode("b", notReady)},
			bound: []*v1.Pod{makePod("ns", "r1", onNode("a", ownedBy("rs")))},
			want:  "a",
		},
		{
			name:    "no nodes",
			pod:     makePod("ns", "p", nil),
			wantErr: "no nodes available to schedule pods",
		},
		{
			name: "mixed reasons are counted and sorted",
			pod:  makePod("ns", "p", requests("cpu", "1")),
			nodes: []*v1.Node{
				makeNode("a", notReady),
				makeNode("b", nil), makeNode("c", nil),
			},
			bound: []*v1.Pod{
				makePod("ns", "x", onNode("b", requests("cpu", "1500m"))),
				makePod("ns", "y", onNode("c", requests("cpu", "2"))),
			},
			wantErr: "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 2 Insufficient cpu. " +
				"preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.",
		},
		{
			name: "one node can report several reasons",
			pod:  makePod("ns", "p", requests("cpu", "3", "memory", "5Gi")),
			nodes: []*v1.Node{
				makeNode("a", nil),
				makeNode("b", func(n *v1.Node) { n.Spec.Unschedulable = true }),
				makeNode("c", func(n *v1.Node) { n.Status.Allocatable[v1.ResourceMemory] = resource.MustParse("8Gi") }),
			},
			wantErr: "0/3 nodes are available: 1 Insufficient memory, 1 node(s) were unschedulable, 2 Insufficient cpu. " +
				"preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.",
		},
		{
			name:    "preemptionPolicy Never",
			pod:     makePod("ns", "p", chain(requests("cpu", "3"), func(p *v1.Pod) { p.Spec.PreemptionPolicy = &never })),
			nodes:   []*v1.Node{makeNode("a", nil)},
			wantErr: "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.",
		},
		{
			name:    "all unresolvable",
			pod:     makePod("ns", "p", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			nodes:   threeNodes,
			wantErr: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := schedule(tc.pod, newSnapshot(tc.nodes, tc.bound))
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("error:\n got %q\nwant %q", gotErr, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("node = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSpreadScores(t *testing.T) {
	nodes := []*v1.Node{
		makeNode("a", zone("z1")), makeNode("b", zone("z1")), makeNode("c", zone("z2")), makeNode("d", nil),
	}
	bound := []*v1.Pod{
		makePod("ns", "r1", onNode("a", ownedBy("rs"))),
		makePod("ns", "r2", onNode("a", ownedBy("rs"))),
		makePod("ns", "r3", onNode("c", ownedBy("rs"))),
	}
	s := newSnapshot(nodes, bound)
	got := spreadScores(makePod("ns", "p", ownedBy("rs")), s.nodes, s.nodes)
	// Node counts a=2 b=0 c=1 d=0 against max 2; zone counts z1=2 z2=1
	// against max 2, weighing 2/3: b = 100/3, c = 50 less a rounding hair
	// (truncated, as Kubernetes truncates); d has no zone and is judged on
	// its node count alone.
	want := []int64{0, 33, 49, 100}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

func TestLeastRequested(t *testing.T) {
	s := newSnapshot([]*v1.Node{makeNode("a", nil)}, []*v1.Pod{makePod("ns", "x", onNode("a", requests("cpu", "1", "memory", "1Gi")))})
	// cpu: (2000-1000-100)/2000 = 45; memory: (4Gi-1Gi-200Mi)/4Gi = 70.
	if got := leastRequested(podRequests(makePod("ns", "p", nil), true), s.nodes[0]); got != 57 {
		t.Errorf("leastRequested = %d, want 57", got)
	}
}

func TestPodRequests(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	cpu := func(q string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(q)}}
	}
	pod := makePod("ns", "p", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{{Name: "a", Resources: cpu("1")}, {Name: "b", Resources: cpu("500m")}}
		p.Spec.InitContainers = []v1.Container{
			{Name: "side", RestartPolicy: &always, Resources: cpu("200m")},
			{Name: "init", Resources: cpu("2")},
		}
		p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m")}
	})
	// Running: 1 + 0.5 + 0.2 sidecar = 1.7; init phase: 2 + 0.2 = 2.2; plus overhead.
	if got := podRequests(pod, false).milliCPU; got != 2250 {
		t.Errorf("milliCPU = %d, want 2250", got)
	}
	// Non-zero: every container without a memory request counts 200Mi.
	if got := podRequests(pod, true).memory; got != 3*defaultMemoryRequest {
		t.Errorf("non-zero memory = %d, want %d", got, 3*defaultMemoryRequest)
	}
}

func TestBackoff(t *testing.T) {
	var got []time.Duration
	for i := 1; i <= 6; i++ {
		got = append(got, backoff(i))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoff (-want +got):\n%s", diff)
	}
}

func TestQueue(t *testing.T) {
	clk := clocktesting.NewFakeClock(baseTime)
	q := newSchedulingQueue(clk)
	hi := int32(100)
	q.add("ns/old", makePod("ns", "old", nil))
	q.add("ns/new", makePod("ns", "new", func(p *v1.Pod) { p.CreationTimestamp.Time = baseTime.Add(time.Minute) }))
	q.add("ns/high", makePod("ns", "high", func(p *v1.Pod) {
		p.CreationTimestamp.Time = baseTime.Add(time.Hour)
		p.Spec.Priority = &hi
	}))
	var order []string
	for range 3 {
		key, _, _ := q.pop()
		order = append(order, key)
	}
	if diff := cmp.Diff([]string{"ns/high", "ns/old", "ns/new"}, order); diff != "" {
		t.Errorf("pop order (-want +got):\n%s", diff)
	}

	q.done("ns/high")
	q.failed("ns/old")
	q.failed("ns/new")
	clk.Step(999 * time.Millisecond)
	q.flush()
	if n := len(q.active); n != 0 {
		t.Fatalf("%d pods active before the first backoff expired", n)
	}
	clk.Step(time.Millisecond)
	q.flush()
	if key, _, _ := q.pop(); key != "ns/old" {
		t.Fatalf("pop = %q after backoff, want ns/old", key)
	}
	q.failed("ns/old") // second failure: 2s
	key, _, _ := q.pop()
	q.failed(key) // ns/new, second failure: 2s

	clk.Step(time.Second)
	q.flush()
	if n := len(q.active); n != 0 {
		t.Fatalf("%d pods active during the second backoff", n)
	}
	q.moveAll() // a node turned Ready: retry 1s after the last attempt
	if n := len(q.active); n != 2 {
		t.Fatalf("%d pods active after a cluster change, want 2", n)
	}

	q.remove("ns/old")
	q.remove("ns/new")
	q.close()
	if _, _, ok := q.pop(); ok {
		t.Error("pop on a closed, empty queue returned a pod")
	}
}

func TestQueueChangeDuringAttempt(t *testing.T) {
	clk := clocktesting.NewFakeClock(baseTime)
	q := newSchedulingQueue(clk)
	q.add("ns/p", makePod("ns", "p", nil))
	for range 4 {
		key, _, _ := q.pop()
		q.failed(key)
		clk.Step(maxBackoff)
		q.flush()
	}
	key, _, _ := q.pop()
	q.moveAll() // the cluster changed while the pod was being tried
	q.failed(key)
	if got := q.pods[key].readyAt.Sub(clk.Now()); got != initialBackoff {
		t.Errorf("retry in %v, want %v", got, initialBackoff)
	}
}

func TestWithCondition(t *testing.T) {
	now := baseTime
	cond := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: "m"}
	pod := makePod("ns", "p", nil)
	first, changed := withCondition(pod, cond, metavTime(now))
	if !changed || len(first.Status.Conditions) != 1 || len(pod.Status.Conditions) != 0 {
		t.Fatalf("first condition not added to a copy: %+v", first.Status.Conditions)
	}
	if _, changed := withCondition(first, cond, metavTime(now.Add(time.Minute))); changed {
		t.Error("same condition reported as a change")
	}
	cond.Message = "m2"
	second, changed := withCondition(first, cond, metavTime(now.Add(time.Minute)))
	if !changed || !second.Status.Conditions[0].LastTransitionTime.Time.Equal(now) {
		t.Errorf("message change: changed=%v, transition %v, want kept at %v", changed, second.Status.Conditions[0].LastTransitionTime, now)
	}
}

// BenchmarkSchedule100PodsOn3Nodes measures the pure decision path: 100
// replicas of one ReplicaSet placed one after another on three nodes in two
// zones, each placement seen by the next.
func BenchmarkSchedule100PodsOn3Nodes(b *testing.B) {
	nodes := []*v1.Node{makeNode("a", zone("z1")), makeNode("b", zone("z1")), makeNode("c", zone("z2"))}
	pods := make([]*v1.Pod, 100)
	for i := range pods {
		pods[i] = makePod("ns", fmt.Sprintf("p%d", i), chain(ownedBy("rs"), requests("cpu", "10m", "memory", "16Mi")))
	}
	for b.Loop() {
		s := newSnapshot(nodes, nil)
		for _, p := range pods {
			node, err := schedule(p, s)
			if err != nil {
				b.Fatal(err)
			}
			s.assume(p, node)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/pod")
}
