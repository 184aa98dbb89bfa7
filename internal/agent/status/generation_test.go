package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestComputeObservedGeneration: the status and the conditions the agent owns carry the
// pod's generation (kubelet since v1.33), so a spec change makes the status differ and
// be written; PodScheduled is the scheduler's and keeps its own.
func TestComputeObservedGeneration(t *testing.T) {
	pod := makePod(func(p *v1.Pod) {
		p.Generation = 3
		p.Status.Conditions[0].ObservedGeneration = 1
	})
	s := Compute(pod, makeView(func(v *PodView) { v.Containers = map[string]ContainerView{"app": runningView(true)} }), now)
	if s.ObservedGeneration != 3 {
		t.Errorf("status.observedGeneration = %d, want 3", s.ObservedGeneration)
	}
	for _, c := range s.Conditions {
		want := int64(3)
		if c.Type == v1.PodScheduled {
			want = 1
		}
		if c.ObservedGeneration != want {
			t.Errorf("condition %s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, want)
		}
	}
}
