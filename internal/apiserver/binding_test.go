package apiserver

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBindingSetsPodScheduled: pods/binding sets spec.nodeName and the PodScheduled=True
// condition in one write, replacing the scheduler's PodScheduled=False, as
// kube-apiserver's binding REST does; the scheduling e2e specs fail on a bound pod
// without it.
func TestBindingSetsPodScheduled(t *testing.T) {
	f := newFixture(t)
	pods := f.client.CoreV1().Pods("default")
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	created, err := pods.Create(f.ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: "0/1 nodes are available"}}
	if _, err := pods.UpdateStatus(f.ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Bind(f.ctx, &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: v1.ObjectReference{Kind: "Node", Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(f.ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "n1" {
		t.Errorf("spec.nodeName = %q, want n1", got.Spec.NodeName)
	}
	var scheduled []v1.PodCondition
	for _, c := range got.Status.Conditions {
		if c.Type == v1.PodScheduled {
			scheduled = append(scheduled, c)
		}
	}
	if len(scheduled) != 1 || scheduled[0].Status != v1.ConditionTrue || scheduled[0].LastTransitionTime.IsZero() {
		t.Fatalf("PodScheduled conditions after binding = %+v, want one True with a transition time", scheduled)
	}
}
