package replicaset

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// expectationsTTL is how long recorded expectations hold back a sync: an
// informer event lost for good (a watch that never delivers it) must not
// block a ReplicaSet forever. Kubernetes uses the same five minutes.
const expectationsTTL = 5 * time.Minute

// expectation is what one ReplicaSet still waits to see in the informer.
type expectation struct {
	creations int
	deletions sets.Set[string]
	recorded  time.Time
}

// expectations remembers, per ReplicaSet key, the pod creations and
// deletions the controller has issued but the pod informer has not yet
// reported, so that a sync on a stale cache neither creates nor deletes
// the same pods twice. Deletions are tracked by pod key, so the delete
// event of a pod is counted once however often it is observed.
type expectations struct {
	clock clock.PassiveClock

	mu   sync.Mutex
	byRS map[string]*expectation
}

func newExpectations(c clock.PassiveClock) *expectations {
	return &expectations{clock: c, byRS: map[string]*expectation{}}
}

// satisfied reports whether the ReplicaSet key may be synced: nothing is
// pending, nothing was ever recorded, or the record has expired.
func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.byRS[key]
	if !ok {
		return true
	}
	if exp.creations <= 0 && exp.deletions.Len() == 0 {
		return true
	}
	return e.clock.Since(exp.recorded) > expectationsTTL
}

// expectCreations replaces key's expectations with n creations.
func (e *expectations) expectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byRS[key] = &expectation{creations: n, deletions: sets.New[string](), recorded: e.clock.Now()}
}

// expectDeletions replaces key's expectations with the deletion of podKeys.
func (e *expectations) expectDeletions(key string, podKeys []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byRS[key] = &expectation{deletions: sets.New(podKeys...), recorded: e.clock.Now()}
}

// creationObserved counts one expected creation as seen (or as never
// going to happen, when the create call failed).
func (e *expectations) creationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.byRS[key]; ok && exp.creations > 0 {
		exp.creations--
	}
}

// deletionObserved counts the deletion of podKey as seen, once.
func (e *expectations) deletionObserved(key, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.byRS[key]; ok {
		exp.deletions.Delete(podKey)
	}
}

// forget drops key's expectations, when its ReplicaSet is gone.
func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byRS, key)
}
