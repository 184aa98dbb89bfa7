package endpointslice

import (
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// writeTracker remembers, per Service, the slice writes the informer has
// not shown yet. While any is pending the cache is stale for that Service:
// syncing on it would, for instance, create a slice a second time.
type writeTracker struct {
	mu sync.Mutex
	// pending maps service key → slice name → resourceVersion written, or
	// deleted for an expected deletion.
	pending map[string]map[string]string
}

// deleted marks an expected deletion in writeTracker.pending.
const deleted = "\x00deleted"

func newWriteTracker() *writeTracker {
	return &writeTracker{pending: map[string]map[string]string{}}
}

func (t *writeTracker) set(key, name, rv string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending[key] == nil {
		t.pending[key] = map[string]string{}
	}
	t.pending[key][name] = rv
}

// wrote records a create or update the API server acknowledged.
func (t *writeTracker) wrote(key string, s *discovery.EndpointSlice) {
	t.set(key, s.Name, s.ResourceVersion)
}

// deleting records an acknowledged deletion.
func (t *writeTracker) deleting(key, name string) {
	t.set(key, name, deleted)
}

// seen consumes the pending entry for an added or updated slice and
// reports whether the event is our own write, which needs no sync.
func (t *writeTracker) seen(key string, s *discovery.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	rv, ok := t.pending[key][s.Name]
	if !ok {
		return false
	}
	delete(t.pending[key], s.Name)
	return rv == s.ResourceVersion
}

// gone consumes the pending entry for a deleted slice and reports whether
// the deletion was ours.
func (t *writeTracker) gone(key, name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	rv, ok := t.pending[key][name]
	delete(t.pending[key], name)
	return ok && rv == deleted
}

// stale reports whether writes for the Service are still on their way to
// the cache. cached looks a slice up in the informer cache: an entry the
// cache already reflects (the event may have arrived before the write was
// recorded) is consumed here, so a missed pairing cannot keep a Service stale.
func (t *writeTracker) stale(key string, cached func(name string) (rv string, exists bool)) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, want := range t.pending[key] {
		rv, exists := cached(name)
		if (want == deleted && !exists) || (want != deleted && exists && !olderVersion(rv, want)) {
			delete(t.pending[key], name)
		}
	}
	return len(t.pending[key]) > 0
}

// olderVersion reports whether resourceVersion a is older than b; versions
// that are not numbers only compare equal.
func olderVersion(a, b string) bool {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if errA != nil || errB != nil {
		return a != b
	}
	return x < y
}

// forget drops everything known about a Service.
func (t *writeTracker) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, key)
}

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
