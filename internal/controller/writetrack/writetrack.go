// Package writetrack tells a controller whether its informer cache already
// shows the writes it made: a sync on a cache that does not yet would act on
// stale state (create an object a second time). The EndpointSlice and
// EndpointSlice mirroring controllers use it, as upstream's
// EndpointSliceTracker serves both.
package writetrack

import (
	"strconv"
	"sync"
)

// Tracker remembers, per key (a Service, an Endpoints object), the writes of
// the objects it owns (EndpointSlices) that the informer has not shown yet.
// While any is pending the cache is stale for that key: syncing on it would,
// for instance, create an object a second time.
type Tracker struct {
	mu sync.Mutex
	// pending maps key → object name → resourceVersion written, or deleted
	// for an expected deletion.
	pending map[string]map[string]string
}

// deleted marks an expected deletion in Tracker.pending.
const deleted = "\x00deleted"

// New returns an empty Tracker.
func New() *Tracker {
	return &Tracker{pending: map[string]map[string]string{}}
}

func (t *Tracker) set(key, name, rv string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending[key] == nil {
		t.pending[key] = map[string]string{}
	}
	t.pending[key][name] = rv
}

// Wrote records a create or update of object name the API server
// acknowledged at resourceVersion rv.
func (t *Tracker) Wrote(key, name, rv string) {
	t.set(key, name, rv)
}

// Deleting records an acknowledged deletion.
func (t *Tracker) Deleting(key, name string) {
	t.set(key, name, deleted)
}

// Seen consumes the pending entry for an added or updated object (name at
// resourceVersion rv) and reports whether the event is our own write, which
// needs no sync.
func (t *Tracker) Seen(key, name, rv string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	want, ok := t.pending[key][name]
	if !ok {
		return false
	}
	delete(t.pending[key], name)
	return want == rv
}

// Gone consumes the pending entry for a deleted object and reports whether
// the deletion was ours.
func (t *Tracker) Gone(key, name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	rv, ok := t.pending[key][name]
	delete(t.pending[key], name)
	return ok && rv == deleted
}

// Stale reports whether writes for key are still on their way to the cache.
// cached looks an object up in the informer cache: an entry the cache
// already reflects (the event may have arrived before the write was
// recorded) is consumed here, so a missed pairing cannot keep a key stale.
func (t *Tracker) Stale(key string, cached func(name string) (rv string, exists bool)) bool {
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

// Forget drops everything known about key.
func (t *Tracker) Forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, key)
}
