package replicaset

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func makeRS(name string, replicas int32, mutate ...func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	for _, m := range mutate {
		m(rs)
	}
	return rs
}

// makePod is a running, ready, scheduled pod of rs (nil: an orphan
// labelled app=x), created at t0.
func makePod(name string, rs *appsv1.ReplicaSet, mutate ...func(*v1.Pod)) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(t0), ResourceVersion: "1",
		},
		Spec: v1.PodSpec{NodeName: "node-a"},
		Status: v1.PodStatus{
			Phase:      v1.PodRunning,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}},
		},
	}
	if rs != nil {
		pod.Labels = map[string]string{}
		for k, v := range rs.Spec.Template.Labels {
			pod.Labels[k] = v
		}
		pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, controllerKind)}
	} else {
		pod.Labels = map[string]string{"app": "x"}
	}
	for _, m := range mutate {
		m(pod)
	}
	return pod
}

func notReady(p *v1.Pod)   { p.Status.Conditions[0].Status = v1.ConditionFalse }
func pending(p *v1.Pod)    { p.Status.Phase = v1.PodPending; notReady(p) }
func unassigned(p *v1.Pod) { p.Spec.NodeName = ""; pending(p) }
func createdAt(d time.Duration) func(*v1.Pod) {
	return func(p *v1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(d)) }
}
func readyAt(d time.Duration) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(d)) }
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPlanReplicaSetCounts(t *testing.T) {
	rs3 := makeRS("web", 3)
	cases := []struct {
		name       string
		rs         *appsv1.ReplicaSet
		pods       int
		manage     bool
		wantCreate int
		wantDelete int
	}{
		{name: "scale up from zero", rs: rs3, pods: 0, manage: true, wantCreate: 3},
		{name: "steady", rs: rs3, pods: 3, manage: true},
		{name: "scale down", rs: rs3, pods: 5, manage: true, wantDelete: 2},
		{name: "expectations pending", rs: rs3, pods: 0, manage: false},
		{name: "burst capped", rs: makeRS("web", 800), pods: 0, manage: true, wantCreate: burstReplicas},
		{name: "delete burst capped", rs: makeRS("web", 0), pods: 600, manage: true, wantDelete: burstReplicas},
		{name: "default replicas is one", rs: makeRS("web", 0, func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = nil }), pods: 0, manage: true, wantCreate: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var pods []*v1.Pod
			for i := range tc.pods {
				pods = append(pods, makePod(fmt.Sprintf("p%d", i), tc.rs))
			}
			p := planReplicaSet(snapshot{rs: tc.rs, active: pods, manage: tc.manage, now: t0})
			if p.create != tc.wantCreate || len(p.delete) != tc.wantDelete {
				t.Errorf("create=%d delete=%d, want %d and %d", p.create, len(p.delete), tc.wantCreate, tc.wantDelete)
			}
		})
	}
}

func TestPodsToDeleteRanking(t *testing.T) {
	rs := makeRS("web", 1)
	cases := []struct {
		name string
		pods []*v1.Pod
		n    int
		want []string
	}{
		{
			name: "unscheduled before pending before running",
			pods: []*v1.Pod{makePod("running", rs), makePod("pending", rs, pending), makePod("unassigned", rs, unassigned)},
			n:    2, want: []string{"unassigned", "pending"},
		},
		{
			name: "not ready before ready",
			pods: []*v1.Pod{makePod("ready", rs), makePod("unready", rs, notReady)},
			n:    1, want: []string{"unready"},
		},
		{
			name: "lower deletion cost first",
			pods: []*v1.Pod{
				makePod("cheap", rs, func(p *v1.Pod) { p.Annotations = map[string]string{deletionCostAnnotation: "-5"} }),
				makePod("dear", rs, func(p *v1.Pod) { p.Annotations = map[string]string{deletionCostAnnotation: "100"} }),
				makePod("plain", rs),
			},
			n: 1, want: []string{"cheap"},
		},
		{
			name: "doubled up on a node first",
			pods: []*v1.Pod{
				makePod("alone", rs, func(p *v1.Pod) { p.Spec.NodeName = "node-b" }),
				makePod("crowded", rs),
				makePod("crowded2", rs, createdAt(-time.Hour), readyAt(-time.Hour)),
			},
			n: 1, want: []string{"crowded"},
		},
		{
			name: "ready most recently first",
			pods: []*v1.Pod{
				makePod("old", rs, func(p *v1.Pod) { p.Spec.NodeName = "n1" }, readyAt(-10*time.Hour)),
				makePod("new", rs, func(p *v1.Pod) { p.Spec.NodeName = "n2" }, readyAt(-time.Minute)),
			},
			n: 1, want: []string{"new"},
		},
		{
			name: "more restarts first",
			pods: []*v1.Pod{
				makePod("calm", rs, func(p *v1.Pod) { p.Spec.NodeName = "n1" }),
				makePod("crashy", rs, func(p *v1.Pod) {
					p.Spec.NodeName = "n2"
					p.Status.ContainerStatuses = []v1.ContainerStatus{{RestartCount: 4}}
				}),
			},
			n: 1, want: []string{"crashy"},
		},
		{
			name: "newest first",
			pods: []*v1.Pod{
				makePod("older", rs, func(p *v1.Pod) { p.Spec.NodeName = "n1" }, notReady, createdAt(-10*time.Hour)),
				makePod("newer", rs, func(p *v1.Pod) { p.Spec.NodeName = "n2" }, notReady, createdAt(-time.Minute)),
			},
			n: 1, want: []string{"newer"},
		},
	}
	now := t0.Add(time.Minute)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := podsToDelete(tc.pods, tc.pods, tc.n, now)
			if diff := cmp.Diff(tc.want, names(got)); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReplicaSetStatus(t *testing.T) {
	rs := makeRS("web", 4, func(rs *appsv1.ReplicaSet) {
		rs.Spec.MinReadySeconds = 30
		rs.Spec.Template.Labels["tier"] = "front"
		rs.Generation = 7
		rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue}}
	})
	now := t0.Add(time.Minute)
	active := []*v1.Pod{
		makePod("a", rs),
		makePod("b", rs, readyAt(50*time.Second)),
		makePod("c", rs, notReady),
		makePod("d", rs, func(p *v1.Pod) { delete(p.Labels, "tier") }),
	}
	terminating := []*v1.Pod{makePod("e", rs)}
	got := replicaSetStatus(rs, active, terminating, now)
	want := appsv1.ReplicaSetStatus{
		Replicas: 4, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 2,
		TerminatingReplicas: new(int32(1)), ObservedGeneration: 7,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}

	failed := failedStatus(got, &appsv1.ReplicaSetStatus{}, reasonFailedCreate, errors.New("quota exceeded"), now)
	wantCond := []appsv1.ReplicaSetCondition{{
		Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now),
		Reason: "FailedCreate", Message: "quota exceeded",
	}}
	if diff := cmp.Diff(wantCond, failed.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	again := failedStatus(got, &failed, reasonFailedCreate, errors.New("other"), now.Add(time.Hour))
	if diff := cmp.Diff(wantCond, again.Conditions); diff != "" {
		t.Errorf("a repeated failure rewrote the condition (-want +got):\n%s", diff)
	}
}

func TestClaimPods(t *testing.T) {
	rs := makeRS("web", 3)
	other := makeRS("other", 1)
	orphan := makePod("orphan", nil, func(p *v1.Pod) { p.Labels = map[string]string{"app": "web"} })
	cases := []struct {
		name                      string
		rs                        *appsv1.ReplicaSet
		pods                      []*v1.Pod
		owned, adopt, releaseWant []string
	}{
		{
			name: "owned, orphan, foreign, non-matching",
			rs:   rs,
			pods: []*v1.Pod{
				makePod("mine", rs),
				orphan,
				makePod("theirs", other, func(p *v1.Pod) { p.Labels = map[string]string{"app": "web"} }),
				makePod("stray", nil),
				makePod("moved", rs, func(p *v1.Pod) { p.Labels = map[string]string{"app": "elsewhere"} }),
				makePod("dying-orphan", nil, func(p *v1.Pod) {
					p.Labels = map[string]string{"app": "web"}
					p.DeletionTimestamp = &metav1.Time{Time: t0}
				}),
			},
			owned: []string{"mine"}, adopt: []string{"orphan"}, releaseWant: []string{"moved"},
		},
		{
			name:  "a deleted ReplicaSet neither adopts nor releases",
			rs:    makeRS("web", 3, func(rs *appsv1.ReplicaSet) { rs.DeletionTimestamp = &metav1.Time{Time: t0} }),
			pods:  []*v1.Pod{makePod("mine", rs), orphan, makePod("moved", rs, func(p *v1.Pod) { p.Labels = nil })},
			owned: []string{"mine"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := metav1.LabelSelectorAsSelector(tc.rs.Spec.Selector)
			if err != nil {
				t.Fatal(err)
			}
			c := claimPods(tc.rs, sel, tc.pods)
			got := [][]string{names(c.Owned), names(c.Adopt), names(c.Release)}
			if diff := cmp.Diff([][]string{tc.owned, tc.adopt, tc.releaseWant}, got); diff != "" {
				t.Errorf("owned/adopt/release (-want +got):\n%s", diff)
			}
		})
	}
	if c := claimPods(rs, labels.Everything(), nil); c.Owned != nil || c.Adopt != nil {
		t.Errorf("claims of no pods: %+v", c)
	}
}

func TestPodFromTemplate(t *testing.T) {
	rs := makeRS("web-5d9c8b", 1, func(rs *appsv1.ReplicaSet) {
		rs.Spec.Template.Labels["pod-template-hash"] = "5d9c8b"
		rs.Spec.Template.Annotations = map[string]string{"a": "b"}
	})
	pod, err := podFromTemplate(rs)
	if err != nil {
		t.Fatal(err)
	}
	if pod.GenerateName != "web-5d9c8b-" || pod.Name != "" || pod.Namespace != "ns" {
		t.Errorf("naming: generateName=%q name=%q namespace=%q", pod.GenerateName, pod.Name, pod.Namespace)
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.UID != rs.UID || ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("controller ref: %+v", ref)
	}
	if diff := cmp.Diff(rs.Spec.Template.Labels, pod.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	pod.Labels["x"] = "y"
	if _, ok := rs.Spec.Template.Labels["x"]; ok {
		t.Error("pod shares the template's label map")
	}
	if _, err := podFromTemplate(makeRS("bare", 1, func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Labels = nil })); err == nil {
		t.Error("a template without labels gave a pod")
	}
}

func TestSlowStart(t *testing.T) {
	var calls atomic.Int32
	done, err := slowStart(10, func() error { calls.Add(1); return nil })
	if done != 10 || err != nil || calls.Load() != 10 {
		t.Errorf("all succeed: done=%d calls=%d err=%v", done, calls.Load(), err)
	}
	calls.Store(0)
	done, err = slowStart(10, func() error { calls.Add(1); return errors.New("quota") })
	if done != 0 || err == nil || calls.Load() != 1 {
		t.Errorf("first fails: done=%d calls=%d err=%v, want one call", done, calls.Load(), err)
	}
}

// BenchmarkPlanReplicaSet plans a scale-down from 300 to 150 replicas
// spread over 10 nodes, the worst case (it ranks every pod).
func BenchmarkPlanReplicaSet(b *testing.B) {
	rs := makeRS("web", 150)
	var pods []*v1.Pod
	for i := range 300 {
		pods = append(pods, makePod(fmt.Sprintf("p%d", i), rs, func(p *v1.Pod) {
			p.Spec.NodeName = fmt.Sprintf("node-%d", i%10)
			p.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(i) * time.Second))
		}))
	}
	s := snapshot{rs: rs, active: pods, related: pods, manage: true, now: t0.Add(time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		p := planReplicaSet(s)
		if len(p.delete) != 150 {
			b.Fatalf("deleted %d", len(p.delete))
		}
	}
}
