package scheduler

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var baseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// makeNode returns a Ready node with 2 cores, 4Gi of memory and room for 110
// pods, changed by mut.
func makeNode(name string, mut func(*v1.Node)) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: v1.NodeStatus{
			Allocatable: v1.ResourceList{
				v1.ResourceCPU:    resource.MustParse("2"),
				v1.ResourceMemory: resource.MustParse("4Gi"),
				v1.ResourcePods:   resource.MustParse("110"),
			},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
	if mut != nil {
		mut(n)
	}
	return n
}

// makePod returns a pending pod with one request-less container, changed by
// mut.
func makePod(ns, name string, mut func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID(ns + "-" + name),
			CreationTimestamp: metav1.NewTime(baseTime),
		},
		Spec: v1.PodSpec{
			SchedulerName: DefaultSchedulerName,
			Containers:    []v1.Container{{Name: "c", Image: "busybox"}},
		},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	if mut != nil {
		mut(p)
	}
	return p
}

// requests sets the first container's requests from name/quantity pairs.
func requests(pairs ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		rl := v1.ResourceList{}
		for i := 0; i+1 < len(pairs); i += 2 {
			rl[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
		}
		p.Spec.Containers[0].Resources.Requests = rl
	}
}

// onNode binds a pod to a node.
func onNode(node string, muts ...func(*v1.Pod)) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.NodeName = node
		p.Status.Phase = v1.PodRunning
		for _, m := range muts {
			m(p)
		}
	}
}

// ownedBy makes a pod a replica of the named ReplicaSet.
func ownedBy(rs string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID("uid-" + rs), Controller: &yes,
		}}
	}
}

func chain(muts ...func(*v1.Pod)) func(*v1.Pod) {
	return func(p *v1.Pod) {
		for _, m := range muts {
			m(p)
		}
	}
}

func zone(z string) func(*v1.Node) {
	return func(n *v1.Node) { n.Labels[zoneLabel] = z }
}

func notReady(n *v1.Node) {
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
}

func metavTime(t time.Time) metav1.Time { return metav1.NewTime(t) }
