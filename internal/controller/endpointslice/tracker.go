package endpointslice

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
)

// triggerTracker computes the last-change-trigger-time annotation as
// Kubernetes does: the earliest of the pod readiness transitions and the
// Service creation that changed since the previous sync, or the Service's
// creation time on its first sync.
type triggerTracker struct {
	mu     sync.Mutex
	states map[string]triggerState
}

type triggerState struct {
	service time.Time
	pods    map[string]time.Time
}

func newTriggerTracker() *triggerTracker {
	return &triggerTracker{states: map[string]triggerState{}}
}

// compute updates the state for key and returns the trigger time, zero
// when nothing observable changed.
func (t *triggerTracker) compute(key string, svc *v1.Service, pods []*v1.Pod) time.Time {
	t.mu.Lock()
	prev, known := t.states[key]
	t.mu.Unlock()

	var earliest time.Time
	next := triggerState{service: svc.CreationTimestamp.Time, pods: map[string]time.Time{}}
	consider := func(at time.Time) {
		if earliest.IsZero() || at.Before(earliest) {
			earliest = at
		}
	}
	for _, pod := range pods {
		at := readyTransition(pod)
		if at.IsZero() {
			continue
		}
		next.pods[pod.Name] = at
		if at.After(prev.pods[pod.Name]) {
			consider(at)
		}
	}
	if next.service.After(prev.service) {
		consider(next.service)
	}

	t.mu.Lock()
	t.states[key] = next
	t.mu.Unlock()
	if !known {
		return svc.CreationTimestamp.Time
	}
	return earliest
}

// forget drops the state of a deleted Service.
func (t *triggerTracker) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.states, key)
}

// readyTransition is the last transition time of the pod's Ready condition.
func readyTransition(pod *v1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
