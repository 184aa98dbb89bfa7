package scheduler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

var podsGVR = v1.SchemeGroupVersion.WithResource("pods")

// harness runs a Scheduler against a fake clientset whose pods/binding
// subresource behaves like the API server's: it sets spec.nodeName once.
type harness struct {
	client *fake.Clientset
	events *record.FakeRecorder

	mu       sync.Mutex
	bindings []string // "ns/name=node", in order
}

// start runs the scheduler over objs. With applyBindings false, bindings are
// accepted but never reach the store, as when the watch lags behind.
func start(t *testing.T, applyBindings bool, objs ...runtime.Object) *harness {
	t.Helper()
	h := &harness{client: fake.NewClientset(objs...), events: record.NewFakeRecorder(100)}
	h.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		create, ok := action.(k8stesting.CreateAction)
		if !ok || action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := create.GetObject().(*v1.Binding)
		obj, err := h.client.Tracker().Get(podsGVR, b.Namespace, b.Name, metav1.GetOptions{})
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		if pod.Spec.NodeName != "" {
			return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), b.Name, fmt.Errorf("pod %s is already assigned to node %q", b.Name, pod.Spec.NodeName))
		}
		h.mu.Lock()
		h.bindings = append(h.bindings, b.Namespace+"/"+b.Name+"="+b.Target.Name)
		h.mu.Unlock()
		if !applyBindings {
			return true, b, nil
		}
		pod.Spec.NodeName = b.Target.Name
		return true, b, h.client.Tracker().Update(podsGVR, pod, b.Namespace)
	})
	factory := informers.NewSharedInformerFactory(h.client, 0)
	s := New(Config{Client: h.client, Informers: factory, Recorder: h.events})
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		s.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	return h
}

func (h *harness) boundTo() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.bindings...)
}

// nextEvent waits for the next recorded event.
func (h *harness) nextEvent(t *testing.T) string {
	t.Helper()
	select {
	case e := <-h.events.Events:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return ""
	}
}

func (h *harness) pod(t *testing.T, ns, name string) *v1.Pod {
	t.Helper()
	p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (h *harness) statusUpdates() int {
	n := 0
	for _, a := range h.client.Actions() {
		if (a.GetVerb() == "update" || a.GetVerb() == "patch") && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func TestReplicasSpreadOverNodesAndZones(t *testing.T) {
	objs := []runtime.Object{
		makeNode("a", zone("z1")), makeNode("b", zone("z1")), makeNode("c", zone("z2")),
	}
	for i := range 3 {
		objs = append(objs, makePod("ns", fmt.Sprintf("web-%d", i), chain(ownedBy("web"), func(p *v1.Pod) {
			p.CreationTimestamp.Time = baseTime.Add(time.Duration(i) * time.Second)
		})))
	}
	h := start(t, true, objs...)
	var events []string
	for range 3 {
		events = append(events, h.nextEvent(t))
	}
	want := []string{
		"Normal Scheduled Successfully assigned ns/web-0 to a",
		"Normal Scheduled Successfully assigned ns/web-1 to c",
		"Normal Scheduled Successfully assigned ns/web-2 to b",
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for i, node := range []string{"a", "c", "b"} {
		if got := h.pod(t, "ns", fmt.Sprintf("web-%d", i)).Spec.NodeName; got != node {
			t.Errorf("web-%d on %q, want %q", i, got, node)
		}
	}
}

func TestInsufficientResources(t *testing.T) {
	h := start(t, true, makeNode("a", nil), makePod("ns", "big", requests("cpu", "3")))
	const msg = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
	if got := h.nextEvent(t); got != "Warning FailedScheduling "+msg {
		t.Fatalf("event %q", got)
	}
	// The retry after the 1s backoff fails the same way and leaves the
	// condition alone.
	if got := h.nextEvent(t); got != "Warning FailedScheduling "+msg {
		t.Fatalf("second event %q", got)
	}
	if n := h.statusUpdates(); n != 1 {
		t.Errorf("%d status updates, want 1", n)
	}
	conds := h.pod(t, "ns", "big").Status.Conditions
	if len(conds) != 1 {
		t.Fatalf("conditions %+v", conds)
	}
	c := conds[0]
	if c.Type != v1.PodScheduled || c.Status != v1.ConditionFalse || c.Reason != v1.PodReasonUnschedulable || c.Message != msg {
		t.Errorf("condition %+v", c)
	}
	if b := h.boundTo(); len(b) != 0 {
		t.Errorf("bound %v", b)
	}
}

func TestNodeTurningReadySchedulesWaitingPod(t *testing.T) {
	h := start(t, true, makeNode("a", notReady), makePod("ns", "p", nil))
	want := "Warning FailedScheduling 0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. " +
		"preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
	if got := h.nextEvent(t); got != want {
		t.Fatalf("event %q, want %q", got, want)
	}
	node := makeNode("a", nil)
	if _, err := h.client.CoreV1().Nodes().UpdateStatus(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		e := h.nextEvent(t)
		if e == "Normal Scheduled Successfully assigned ns/p to a" {
			break
		}
		if !strings.HasPrefix(e, "Warning FailedScheduling") {
			t.Fatalf("unexpected event %q", e)
		}
	}
	if got := h.pod(t, "ns", "p").Spec.NodeName; got != "a" {
		t.Errorf("pod on %q, want a", got)
	}
}

// TestAssumedPodHoldsResources binds without the store ever showing it: the
// scheduler must still count the first pod and refuse the second.
func TestAssumedPodHoldsResources(t *testing.T) {
	h := start(t, false,
		makeNode("a", nil),
		makePod("ns", "first", requests("cpu", "1500m")),
		makePod("ns", "second", chain(requests("cpu", "1500m"), func(p *v1.Pod) { p.CreationTimestamp.Time = baseTime.Add(time.Second) })),
	)
	if got := h.nextEvent(t); got != "Normal Scheduled Successfully assigned ns/first to a" {
		t.Fatalf("first event %q", got)
	}
	want := "Warning FailedScheduling 0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
	if got := h.nextEvent(t); got != want {
		t.Fatalf("second event %q, want %q", got, want)
	}
	if diff := cmp.Diff([]string{"ns/first=a"}, h.boundTo()); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
}

func TestIgnoresPodsNotWaitingForUs(t *testing.T) {
	deleting := metav1.NewTime(baseTime)
	h := start(t, true,
		makeNode("a", nil),
		makePod("ns", "other-scheduler", func(p *v1.Pod) { p.Spec.SchedulerName = "custom" }),
		makePod("ns", "gated", func(p *v1.Pod) { p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "wait"}} }),
		makePod("ns", "deleting", func(p *v1.Pod) { p.DeletionTimestamp = &deleting }),
		makePod("ns", "done", func(p *v1.Pod) { p.Status.Phase = v1.PodFailed }),
		makePod("ns", "ours", func(p *v1.Pod) { p.CreationTimestamp.Time = baseTime.Add(time.Hour) }),
	)
	if got := h.nextEvent(t); got != "Normal Scheduled Successfully assigned ns/ours to a" {
		t.Fatalf("event %q", got)
	}
	if diff := cmp.Diff([]string{"ns/ours=a"}, h.boundTo()); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
}
