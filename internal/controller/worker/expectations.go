package worker

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
)

// ExpectationsTTL bounds how long unobserved writes block a sync, in case
// an informer event is lost.
const ExpectationsTTL = 5 * time.Minute

// Expectations count the pod creates and deletes a controller has issued
// but not yet seen in its informer, per owner key, so that informer lag
// never makes it create or delete twice.
type Expectations struct {
	mu    sync.Mutex
	now   func() time.Time
	items map[string]*expectation
}

type expectation struct {
	adds, dels int
	at         time.Time
}

// NewExpectations returns empty Expectations whose records expire after
// ExpectationsTTL as measured by now.
func NewExpectations(now func() time.Time) *Expectations {
	return &Expectations{now: now, items: map[string]*expectation{}}
}

// Expect records adds and deletes about to be issued for key.
func (e *Expectations) Expect(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.items[key] = &expectation{adds: adds, dels: dels, at: e.now()}
}

// Observe lowers the pending counts for key (a negative count is an
// observed create or delete; a failed write is observed at once too).
func (e *Expectations) Observe(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.items[key]; ok {
		x.adds -= adds
		x.dels -= dels
	}
}

// ObservePod observes one pod event of key's owner, counted by PodObservation.
func (e *Expectations) ObservePod(key string, old, cur *v1.Pod) {
	adds, dels := PodObservation(old, cur)
	e.Observe(key, adds, dels)
}

// Satisfied says whether every issued write for key was observed, or the
// record expired.
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.items[key]
	if !ok {
		return true
	}
	return (x.adds <= 0 && x.dels <= 0) || e.now().Sub(x.at) > ExpectationsTTL
}

// Forget drops key's record (its owner is gone).
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.items, key)
}
