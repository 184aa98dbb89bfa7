package status

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func requirements(reqCPU, limCPU string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(reqCPU)}}
	if limCPU != "" {
		r.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse(limCPU)}
	}
	return r
}

func TestComputeResize(t *testing.T) {
	pending := &v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred,
		Message: "Node didn't have enough resource: cpu, requested: 5000, used: 0, capacity: 2000", ObservedGeneration: 3,
		LastTransitionTime: metav1.NewTime(now)}
	pod := makePod(func(p *v1.Pod) {
		p.Generation = 3
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "side", Image: "busybox"}, v1.Container{Name: "wait", Image: "busybox"})
		p.Spec.Containers[0].Resources = requirements("5", "5")
		// A resize that ended: its old condition goes.
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue})
	})
	view := makeView(func(v *PodView) {
		v.Containers = map[string]ContainerView{"app": runningView(true), "side": runningView(true)}
		v.Resize = ResizeView{
			Allocated: map[string]v1.ResourceRequirements{"app": requirements("100m", "200m"), "side": {}, "wait": requirements("10m", "")},
			Actual:    map[string]v1.ResourceRequirements{"app": requirements("100m", "150m")},
			Pending:   pending,
		}
	})
	s := Compute(pod, view, now)
	type got struct {
		Allocated v1.ResourceList
		Resources *v1.ResourceRequirements
	}
	byName := map[string]got{}
	for _, st := range s.ContainerStatuses {
		byName[st.Name] = got{st.AllocatedResources, st.Resources}
	}
	app := requirements("100m", "150m")
	want := map[string]got{
		// The cgroup's values while it runs, the allocated requests.
		"app": {Allocated: requirements("100m", "").Requests, Resources: &app},
		// No requests: none allocated, an empty resources block.
		"side": {Resources: &v1.ResourceRequirements{}},
		// Not created yet: nothing.
		"wait": {},
	}
	if diff := cmp.Diff(want, byName); diff != "" {
		t.Errorf("container statuses (-want +got):\n%s", diff)
	}
	if q := s.AllocatedResources[v1.ResourceCPU]; q.String() != "110m" {
		t.Errorf("pod allocatedResources cpu = %s, want 110m", q.String())
	}
	var resize []v1.PodCondition
	for _, c := range s.Conditions {
		if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
			resize = append(resize, c)
		}
	}
	if diff := cmp.Diff([]v1.PodCondition{*pending}, resize); diff != "" {
		t.Errorf("resize conditions (-want +got):\n%s", diff)
	}
}

// A runtime that does not track allocations reports no resources, as before.
func TestComputeWithoutResize(t *testing.T) {
	pod := makePod(func(p *v1.Pod) { p.Spec.Containers[0].Resources = requirements("1", "") })
	s := Compute(pod, makeView(func(v *PodView) { v.Containers = map[string]ContainerView{"app": runningView(true)} }), now)
	if st := s.ContainerStatuses[0]; st.Resources != nil || st.AllocatedResources != nil || s.AllocatedResources != nil {
		t.Errorf("resources reported without an allocation: %+v %+v", st, s.AllocatedResources)
	}
}
