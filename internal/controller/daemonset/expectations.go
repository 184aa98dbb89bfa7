package daemonset

import (
	"sync"
	"time"
)

// expectationsTTL bounds how long unobserved writes block a sync, in case
// an informer event is lost.
const expectationsTTL = 5 * time.Minute

// expectations count the pod creates and deletes a controller has issued
// but not yet seen in its informer, per owner key, so that informer lag
// never makes it create or delete twice.
type expectations struct {
	mu    sync.Mutex
	now   func() time.Time
	items map[string]*expectation
}

type expectation struct {
	adds, dels int
	at         time.Time
}

func newExpectations(now func() time.Time) *expectations {
	return &expectations{now: now, items: map[string]*expectation{}}
}

// expect records adds and deletes about to be issued for key.
func (e *expectations) expect(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.items[key] = &expectation{adds: adds, dels: dels, at: e.now()}
}

// observe lowers the pending counts for key (a negative count is an
// observed create or delete; a failed write is observed at once too).
func (e *expectations) observe(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.items[key]; ok {
		x.adds -= adds
		x.dels -= dels
	}
}

// satisfied says whether every issued write for key was observed, or the
// record expired.
func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.items[key]
	if !ok {
		return true
	}
	return (x.adds <= 0 && x.dels <= 0) || e.now().Sub(x.at) > expectationsTTL
}

// forget drops key's record (its owner is gone).
func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.items, key)
}
