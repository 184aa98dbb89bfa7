package daemonset

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a controller over a fake clientset whose informer caches are
// filled from the client by resync, so each sync sees exactly the state the
// test set up.
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

// resync replaces the informer caches with the client's objects.
func (f *fixture) resync(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	replace := func(idx interface{ Replace([]any, string) error }, items []any) {
		if err := idx.Replace(items, ""); err != nil {
			t.Fatal(err)
		}
	}
	ds, _ := f.client.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	pods, _ := f.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	nodes, _ := f.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	revs, _ := f.client.AppsV1().ControllerRevisions("").List(ctx, metav1.ListOptions{})
	var items []any
	for i := range ds.Items {
		items = append(items, &ds.Items[i])
	}
	replace(f.factory.Apps().V1().DaemonSets().Informer().GetIndexer(), items)
	items = nil
	for i := range pods.Items {
		items = append(items, &pods.Items[i])
	}
	replace(f.factory.Core().V1().Pods().Informer().GetIndexer(), items)
	items = nil
	for i := range nodes.Items {
		items = append(items, &nodes.Items[i])
	}
	replace(f.factory.Core().V1().Nodes().Informer().GetIndexer(), items)
	items = nil
	for i := range revs.Items {
		items = append(items, &revs.Items[i])
	}
	replace(f.factory.Apps().V1().ControllerRevisions().Informer().GetIndexer(), items)
}

// sync resyncs the caches, marks every write observed, and syncs key.
func (f *fixture) sync(t *testing.T, key string) {
	t.Helper()
	f.resync(t)
	f.c.expectations.Forget(key)
	if err := f.c.sync(context.Background(), key); err != nil {
		t.Fatalf("sync %s: %v", key, err)
	}
}

// podNodes lists the target node of each live pod, sorted.
func (f *fixture) podNodes(t *testing.T) []string {
	t.Helper()
	pods, err := f.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, targetNode(&p))
	}
	sort.Strings(out)
	return out
}

func (f *fixture) daemonSet(t *testing.T, ns, name string) *appsv1.DaemonSet {
	t.Helper()
	ds, err := f.client.AppsV1().DaemonSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func makeNode(name string, mut func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	if mut != nil {
		mut(n)
	}
	return n
}

func makeDaemonSet(ns, name string, mut func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{
					MaxUnavailable: ptr(intstr.FromInt32(1)),
					MaxSurge:       ptr(intstr.FromInt32(0)),
				},
			},
			RevisionHistoryLimit: ptr[int32](10),
		},
	}
	if mut != nil {
		mut(ds)
	}
	return ds
}

func ptr[T any](v T) *T { return &v }

func nodes(names ...string) []runtime.Object {
	var out []runtime.Object
	for _, n := range names {
		out = append(out, makeNode(n, nil))
	}
	return out
}

func TestOnePodPerNode(t *testing.T) {
	objs := append(nodes("n1", "n2", "n3", "n4"), makeDaemonSet("default", "log-collector", nil))
	f := newFixture(t, objs...)
	f.sync(t, "default/log-collector")
	if diff := cmp.Diff([]string{"n1", "n2", "n3", "n4"}, f.podNodes(t)); diff != "" {
		t.Fatalf("pods per node (-want +got):\n%s", diff)
	}
	// A second sync with everything observed changes nothing.
	f.client.ClearActions()
	f.sync(t, "default/log-collector")
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "delete" {
			t.Fatalf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	st := f.daemonSet(t, "default", "log-collector").Status
	want := appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 4, CurrentNumberScheduled: 4,
		UpdatedNumberScheduled: 4, NumberUnavailable: 4}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Fatalf("status (-want +got):\n%s", diff)
	}

	if _, err := f.client.CoreV1().Nodes().Create(context.Background(), makeNode("n5", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync(t, "default/log-collector")
	if diff := cmp.Diff([]string{"n1", "n2", "n3", "n4", "n5"}, f.podNodes(t)); diff != "" {
		t.Fatalf("after adding n5 (-want +got):\n%s", diff)
	}

	if err := f.client.CoreV1().Nodes().Delete(context.Background(), "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync(t, "default/log-collector")
	if diff := cmp.Diff([]string{"n1", "n3", "n4", "n5"}, f.podNodes(t)); diff != "" {
		t.Fatalf("after removing n2 (-want +got):\n%s", diff)
	}
}

func TestCreatedPodShape(t *testing.T) {
	ds := makeDaemonSet("default", "ds", nil)
	f := newFixture(t, makeNode("n1", nil), ds)
	f.sync(t, "default/ds")
	pods, _ := f.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 1 {
		t.Fatalf("got %d pods", len(pods.Items))
	}
	pod := pods.Items[0]
	if !strings.HasPrefix(pod.Name, "ds-") {
		t.Errorf("name %q, want prefix ds-", pod.Name)
	}
	if ref := metav1.GetControllerOf(&pod); ref == nil || ref.UID != ds.UID || ref.Kind != "DaemonSet" {
		t.Errorf("controller ref %+v", ref)
	}
	if pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != templateHash(ds) {
		t.Errorf("hash label %q", pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey])
	}
	if got := pod.Labels["pod-template-generation"]; got != fmt.Sprint(ds.Generation) {
		t.Errorf("pod-template-generation label %q, want %d", got, ds.Generation)
	}
	wantAff := &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}}}}}
	if diff := cmp.Diff(wantAff, pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution); diff != "" {
		t.Errorf("affinity (-want +got):\n%s", diff)
	}
	var keys []string
	for _, tol := range pod.Spec.Tolerations {
		keys = append(keys, tol.Key+":"+string(tol.Effect))
	}
	want := []string{"node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/unreachable:NoExecute",
		"node.kubernetes.io/disk-pressure:NoSchedule", "node.kubernetes.io/memory-pressure:NoSchedule",
		"node.kubernetes.io/pid-pressure:NoSchedule", "node.kubernetes.io/unschedulable:NoSchedule"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	revs, _ := f.client.AppsV1().ControllerRevisions("default").List(context.Background(), metav1.ListOptions{})
	if len(revs.Items) != 1 || revs.Items[0].Revision != 1 || revs.Items[0].Name != "ds-"+templateHash(ds) {
		t.Errorf("revisions %+v", revs.Items)
	}
	if got := <-f.events.Events; !strings.HasPrefix(got, "Normal SuccessfulCreate Created pod: ds-") {
		t.Errorf("event %q", got)
	}
}

func TestNodeFit(t *testing.T) {
	taint := func(key string, effect v1.TaintEffect) func(*v1.Node) {
		return func(n *v1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: "x", Effect: effect})
		}
	}
	cases := []struct {
		name                      string
		node                      *v1.Node
		ds                        func(*appsv1.DaemonSet)
		shouldRun, shouldContinue bool
	}{
		{name: "plain node", node: makeNode("n", nil), shouldRun: true, shouldContinue: true},
		{name: "NoSchedule taint", node: makeNode("n", taint("dedicated", v1.TaintEffectNoSchedule)), shouldContinue: true},
		{name: "NoExecute taint", node: makeNode("n", taint("dedicated", v1.TaintEffectNoExecute))},
		{name: "PreferNoSchedule ignored", node: makeNode("n", taint("dedicated", v1.TaintEffectPreferNoSchedule)), shouldRun: true, shouldContinue: true},
		{
			name: "tolerated taint",
			node: makeNode("n", taint("dedicated", v1.TaintEffectNoSchedule)),
			ds: func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "x"}}
			},
			shouldRun: true, shouldContinue: true,
		},
		{name: "automatic not-ready toleration", node: makeNode("n", taint(taintNotReady, v1.TaintEffectNoExecute)), shouldRun: true, shouldContinue: true},
		{name: "automatic unschedulable toleration", node: makeNode("n", taint(taintUnschedulable, v1.TaintEffectNoSchedule)), shouldRun: true, shouldContinue: true},
		{name: "network-unavailable without hostNetwork", node: makeNode("n", taint(taintNetworkUnavailable, v1.TaintEffectNoSchedule)), shouldContinue: true},
		{
			name:      "network-unavailable with hostNetwork",
			node:      makeNode("n", taint(taintNetworkUnavailable, v1.TaintEffectNoSchedule)),
			ds:        func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true },
			shouldRun: true, shouldContinue: true,
		},
		{
			name: "nodeSelector mismatch",
			node: makeNode("n", nil),
			ds:   func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"} },
		},
		{
			name:      "nodeSelector match",
			node:      makeNode("n", func(n *v1.Node) { n.Labels["disk"] = "ssd" }),
			ds:        func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"} },
			shouldRun: true, shouldContinue: true,
		},
		{
			name: "required affinity NotIn",
			node: makeNode("n", func(n *v1.Node) { n.Labels["zone"] = "a" }),
			ds: func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
						{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpNotIn, Values: []string{"a"}}}},
					}}}}
			},
		},
		{
			name: "required affinity second term matches field",
			node: makeNode("n", nil),
			ds: func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
						{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpExists}}},
						{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n"}}}},
					}}}}
			},
			shouldRun: true, shouldContinue: true,
		},
		{name: "template nodeName elsewhere", node: makeNode("n", nil), ds: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "other" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run, cont := nodeFit(makeDaemonSet("ns", "ds", tc.ds), tc.node)
			if run != tc.shouldRun || cont != tc.shouldContinue {
				t.Errorf("nodeFit = (%v, %v), want (%v, %v)", run, cont, tc.shouldRun, tc.shouldContinue)
			}
		})
	}
	if run, cont := nodeFit(nil, nil); run || cont {
		t.Error("nil inputs must not fit")
	}
}

func TestTaintedNodeSkippedUnlessTolerated(t *testing.T) {
	tainted := makeNode("n3", func(n *v1.Node) {
		n.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "db", Effect: v1.TaintEffectNoSchedule}}
	})
	objs := append(nodes("n1", "n2"), tainted, makeDaemonSet("default", "ds", nil))
	f := newFixture(t, objs...)
	f.sync(t, "default/ds")
	if diff := cmp.Diff([]string{"n1", "n2"}, f.podNodes(t)); diff != "" {
		t.Fatalf("pods (-want +got):\n%s", diff)
	}
	ds := f.daemonSet(t, "default", "ds")
	ds.Spec.Template.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists}}
	if _, err := f.client.AppsV1().DaemonSets("default").Update(context.Background(), ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The template changed: n3 gets a new pod at once and the old pods,
	// never Ready in the fake, are replaced at once as unavailable.
	f.sync(t, "default/ds")
	if got := f.podNodes(t); !slices.Contains(got, "n3") {
		t.Fatalf("no pod on tolerated node n3: %v", got)
	}
	f.sync(t, "default/ds")
	if diff := cmp.Diff([]string{"n1", "n2", "n3"}, f.podNodes(t)); diff != "" {
		t.Fatalf("pods (-want +got):\n%s", diff)
	}
}

func makePod(name, node, hash string, mut func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			Labels:            map[string]string{"app": "ds", appsv1.DefaultDaemonSetUniqueLabelKey: hash},
			CreationTimestamp: metav1.NewTime(t0)},
		Spec: v1.PodSpec{NodeName: node},
	}
	if mut != nil {
		mut(p)
	}
	return p
}

func terminating(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} }

func ready(p *v1.Pod) {
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
}

func TestCompute(t *testing.T) {
	n := func(names ...string) []*v1.Node {
		var out []*v1.Node
		for _, name := range names {
			out = append(out, makeNode(name, nil))
		}
		return out
	}
	cases := []struct {
		name    string
		ds      func(*appsv1.DaemonSet)
		nodes   []*v1.Node
		pods    []*v1.Pod
		backoff map[string]time.Time
		creates []string
		deletes []string
	}{
		{name: "missing pods created", nodes: n("a", "b"), pods: []*v1.Pod{makePod("p1", "a", "new", ready)}, creates: []string{"b"}},
		{name: "pod on removed node deleted", nodes: n("a"), pods: []*v1.Pod{makePod("p1", "a", "new", ready), makePod("p2", "gone", "new", ready)}, deletes: []string{"p2"}},
		{
			name:    "duplicate pods: the oldest stays",
			nodes:   n("a"),
			pods:    []*v1.Pod{makePod("p2", "a", "new", func(p *v1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(time.Second)) }), makePod("p1", "a", "new", nil)},
			deletes: []string{"p2"},
		},
		{
			name:    "failed pod deleted, replacement waits",
			nodes:   n("a"),
			pods:    []*v1.Pod{makePod("p1", "a", "new", func(p *v1.Pod) { p.Status.Phase = v1.PodFailed })},
			deletes: []string{"p1"},
		},
		{name: "backoff delays creation", nodes: n("a"), backoff: map[string]time.Time{"a": t0.Add(time.Second)}},
		{name: "terminating pod: the replacement waits for it to go", nodes: n("a"), pods: []*v1.Pod{makePod("p1", "a", "new", terminating)}},
		{
			name: "terminating pod: with maxSurge the replacement starts beside it",
			ds: func(ds *appsv1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr(intstr.FromInt32(1))
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromInt32(0))
			},
			nodes: n("a"), pods: []*v1.Pod{makePod("p1", "a", "new", terminating)}, creates: []string{"a"},
		},
		{name: "terminating pod on a removed node: nothing to do", nodes: n("a"), pods: []*v1.Pod{makePod("p1", "a", "new", ready), makePod("p2", "gone", "new", terminating)}},
		{
			name:    "rolling update: one available old pod at a time",
			nodes:   n("a", "b", "c"),
			pods:    []*v1.Pod{makePod("p1", "a", "old", ready), makePod("p2", "b", "old", ready), makePod("p3", "c", "old", ready)},
			deletes: []string{"p1"},
		},
		{
			name:  "rolling update: waits while a new pod is unavailable",
			nodes: n("a", "b", "c"),
			pods:  []*v1.Pod{makePod("p1", "a", "new", nil), makePod("p2", "b", "old", ready), makePod("p3", "c", "old", ready)},
		},
		{
			name:    "rolling update: unavailable old pods go at once",
			nodes:   n("a", "b"),
			pods:    []*v1.Pod{makePod("p1", "a", "old", nil), makePod("p2", "b", "old", nil)},
			deletes: []string{"p1", "p2"},
		},
		{
			name: "maxUnavailable 2 of 3",
			ds: func(ds *appsv1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromString("50%"))
			},
			nodes:   n("a", "b", "c"),
			pods:    []*v1.Pod{makePod("p1", "a", "old", ready), makePod("p2", "b", "old", ready), makePod("p3", "c", "old", ready)},
			deletes: []string{"p1", "p2"},
		},
		{
			name: "maxSurge creates beside old pods",
			ds: func(ds *appsv1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr(intstr.FromInt32(1))
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromInt32(0))
			},
			nodes:   n("a", "b"),
			pods:    []*v1.Pod{makePod("p1", "a", "old", ready), makePod("p2", "b", "old", ready)},
			creates: []string{"a"},
		},
		{
			name: "maxSurge deletes the old pod once the new one is available",
			ds: func(ds *appsv1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr(intstr.FromInt32(1))
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromInt32(0))
			},
			nodes:   n("a", "b"),
			pods:    []*v1.Pod{makePod("p1", "a", "old", ready), makePod("p3", "a", "new", ready), makePod("p2", "b", "old", ready)},
			creates: []string{"b"},
			deletes: []string{"p1"},
		},
		{
			name: "OnDelete leaves old pods",
			ds: func(ds *appsv1.DaemonSet) {
				ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
			},
			nodes: n("a", "b"),
			pods:  []*v1.Pod{makePod("p1", "a", "old", ready), makePod("p2", "b", "old", ready)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := makeDaemonSet("ns", "ds", tc.ds)
			p := compute(snapshot{ds: ds, hash: "new", nodes: tc.nodes, pods: tc.pods, now: t0, backoff: tc.backoff, manage: true})
			var deletes []string
			for _, pod := range p.deletes {
				deletes = append(deletes, pod.Name)
			}
			sort.Strings(deletes)
			if diff := cmp.Diff(tc.creates, p.creates); diff != "" {
				t.Errorf("creates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.deletes, deletes); diff != "" {
				t.Errorf("deletes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusCounts(t *testing.T) {
	ds := makeDaemonSet("ns", "ds", func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = 10 })
	tainted := makeNode("t", func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}} })
	pods := []*v1.Pod{
		makePod("p1", "a", "new", ready),
		makePod("p2", "b", "old", func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(5 * time.Second))}}
		}),
		makePod("p3", "t", "new", ready),
	}
	p := compute(snapshot{ds: ds, hash: "new", nodes: []*v1.Node{makeNode("a", nil), makeNode("b", nil), makeNode("c", nil), tainted},
		pods: pods, now: t0.Add(12 * time.Second)})
	want := appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, CurrentNumberScheduled: 2, NumberReady: 2,
		UpdatedNumberScheduled: 1, NumberAvailable: 1, NumberUnavailable: 2, NumberMisscheduled: 1}
	if diff := cmp.Diff(want, p.status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if len(p.creates)+len(p.deletes) != 0 {
		t.Errorf("manage=false must not write: %v %v", p.creates, p.deletes)
	}
}

func TestAdoptsOrphanAndReleasesMismatch(t *testing.T) {
	// OnDelete: the adopted pod (without the hash label) is not rolled.
	ds := makeDaemonSet("default", "ds", func(ds *appsv1.DaemonSet) {
		ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	})
	orphan := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orphan", UID: "o", Labels: map[string]string{"app": "ds"}},
		Spec: v1.PodSpec{NodeName: "n1"}}
	stray := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "stray", UID: "s", Labels: map[string]string{"app": "other"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)}}, Spec: v1.PodSpec{NodeName: "n1"}}
	f := newFixture(t, makeNode("n1", nil), ds, orphan, stray)
	f.sync(t, "default/ds")
	var patched []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "patch" {
			patched = append(patched, a.(clienttesting.PatchAction).GetName())
		}
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			t.Error("created a pod although the orphan was adopted")
		}
	}
	sort.Strings(patched)
	if diff := cmp.Diff([]string{"orphan", "stray"}, patched); diff != "" {
		t.Errorf("patched (-want +got):\n%s", diff)
	}
	got, _ := f.client.CoreV1().Pods("default").Get(context.Background(), "orphan", metav1.GetOptions{})
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != ds.UID {
		t.Errorf("orphan not adopted: %+v", got.OwnerReferences)
	}
	got, _ = f.client.CoreV1().Pods("default").Get(context.Background(), "stray", metav1.GetOptions{})
	if len(got.OwnerReferences) != 0 {
		t.Errorf("stray not released: %+v", got.OwnerReferences)
	}
}

func TestExpectationsBlockDuplicateCreates(t *testing.T) {
	f := newFixture(t, makeNode("n1", nil), makeDaemonSet("default", "ds", nil))
	f.sync(t, "default/ds")
	// The informer has not seen the pod yet: a second sync must wait.
	if err := f.c.sync(context.Background(), "default/ds"); err != nil {
		t.Fatal(err)
	}
	if got := f.podNodes(t); len(got) != 1 {
		t.Fatalf("pods on %v, want one", got)
	}
}

func TestFailedPodBackoff(t *testing.T) {
	failed := makePod("p1", "n1", "", func(p *v1.Pod) {
		p.Namespace = "default"
		p.Status.Phase = v1.PodFailed
	})
	ds := makeDaemonSet("default", "ds", nil)
	failed.Labels = map[string]string{"app": "ds"}
	failed.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)}
	f := newFixture(t, makeNode("n1", nil), ds, failed)
	f.sync(t, "default/ds")
	if got := f.podNodes(t); len(got) != 0 {
		t.Fatalf("pods %v, want the failed one deleted and none created", got)
	}
	f.sync(t, "default/ds")
	if got := f.podNodes(t); len(got) != 0 {
		t.Fatalf("pods %v created within the backoff", got)
	}
	f.clock.Step(time.Second)
	f.sync(t, "default/ds")
	if diff := cmp.Diff([]string{"n1"}, f.podNodes(t)); diff != "" {
		t.Fatalf("after backoff (-want +got):\n%s", diff)
	}
}

// TestDeletionObservedWhenTerminating: a pod the controller deleted counts as
// gone once it shows a deletionTimestamp, as upstream (worker.PodObservation), so a
// pod that never finishes terminating (its node is gone) does not hold the
// DaemonSet back.
func TestDeletionObservedWhenTerminating(t *testing.T) {
	// Through the event handler: the sync deletes the pod on a removed node
	// and creates one on n1; the first turns terminating and stays so; once
	// the second is seen, the DaemonSet may act again.
	ds := makeDaemonSet("default", "ds", nil)
	stuck := makePod("stuck", "gone", templateHash(ds), func(p *v1.Pod) {
		p.Namespace = "default"
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)}
	})
	f := newFixture(t, makeNode("n1", nil), ds, stuck)
	f.sync(t, "default/ds")
	if f.c.expectations.Satisfied("default/ds") {
		t.Fatal("expectations satisfied before any pod event")
	}
	pods, _ := f.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 1 || targetNode(&pods.Items[0]) != "n1" {
		t.Fatalf("want the stuck pod deleted and one created on n1, got %+v", pods.Items)
	}
	f.c.onPod(nil, &pods.Items[0])
	stillThere := stuck.DeepCopy()
	terminating(stillThere)
	f.c.onPod(stuck, stillThere)
	if !f.c.expectations.Satisfied("default/ds") {
		t.Fatal("expectations still pending after the deleted pod turned terminating and the created one was seen")
	}
}
