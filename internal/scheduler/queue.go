package scheduler

import (
	"container/heap"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"
)

// Retry delays after failed attempts: the first retry waits initialBackoff,
// each further one twice as long, never more than maxBackoff.
const (
	initialBackoff = time.Second
	maxBackoff     = 10 * time.Second
)

// backoff is how long a pod waits after its attempts-th failed attempt.
func backoff(attempts int) time.Duration {
	d := initialBackoff
	for i := 1; i < attempts && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

type podState int

const (
	stateActive   podState = iota // in the heap, ready to be tried
	stateInFlight                 // handed out by pop, not yet done or failed
	stateWaiting                  // failed, waiting for its retry time
)

// queuedPod is one pending pod the scheduler is responsible for.
type queuedPod struct {
	key      string
	pod      *v1.Pod
	state    podState
	index    int // position in the heap while active
	attempts int
	lastTry  time.Time
	readyAt  time.Time
	popSeq   uint64 // the queue's moveSeq when the pod was handed out
}

// schedulingQueue holds pending pods: active ones in priority order (higher
// spec.priority first, then older), failed ones until their backoff expires
// or the cluster changes in a way that may let them fit. It is safe for use by
// informer handlers and the scheduling loop at once.
type schedulingQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	clock  clock.PassiveClock
	pods   map[string]*queuedPod
	active podHeap
	// moveSeq counts cluster changes, so that a pod which fails against a
	// snapshot older than the latest change is retried soon, not after its
	// full backoff.
	moveSeq uint64
	closed  bool
}

func newSchedulingQueue(c clock.PassiveClock) *schedulingQueue {
	q := &schedulingQueue{clock: c, pods: map[string]*queuedPod{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// add queues a pending pod, or refreshes the copy of one already queued. A
// waiting pod whose spec, labels or annotations changed is retried soon: the
// change may be what it needed.
func (q *schedulingQueue) add(key string, pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.pods[key]
	if !ok {
		e = &queuedPod{key: key, pod: pod}
		q.pods[key] = e
		q.push(e)
		return
	}
	old := e.pod
	e.pod = pod
	switch e.state {
	case stateActive:
		heap.Fix(&q.active, e.index)
	case stateWaiting:
		if !equality.Semantic.DeepEqual(old.Spec, pod.Spec) ||
			!equality.Semantic.DeepEqual(old.Labels, pod.Labels) ||
			!equality.Semantic.DeepEqual(old.Annotations, pod.Annotations) {
			q.hurry(e)
			q.flushLocked()
		}
	}
}

// remove forgets a pod: deleted, bound by someone else, or no longer ours.
func (q *schedulingQueue) remove(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.pods[key]
	if !ok {
		return
	}
	if e.state == stateActive {
		heap.Remove(&q.active, e.index)
	}
	delete(q.pods, key)
}

// pop blocks until a pod is ready to be tried and hands it out; it returns
// false once the queue is closed.
func (q *schedulingQueue) pop() (string, *v1.Pod, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.active) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return "", nil, false
	}
	e := heap.Pop(&q.active).(*queuedPod)
	e.state = stateInFlight
	e.popSeq = q.moveSeq
	return e.key, e.pod, true
}

// done drops a pod that was handed out and needs no retry.
func (q *schedulingQueue) done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e, ok := q.pods[key]; ok && e.state == stateInFlight {
		delete(q.pods, key)
	}
}

// failed parks a pod that was handed out until its backoff expires; if the
// cluster changed while it was being tried, it only waits the initial
// backoff.
func (q *schedulingQueue) failed(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.pods[key]
	if !ok || e.state != stateInFlight {
		return
	}
	now := q.clock.Now()
	e.attempts++
	e.lastTry = now
	e.readyAt = now.Add(backoff(e.attempts))
	e.state = stateWaiting
	if e.popSeq != q.moveSeq {
		q.hurry(e)
	}
}

// moveAll reacts to a cluster change that may let waiting pods fit (a node
// added or made schedulable, resources freed): each is retried as soon as
// the initial backoff since its last attempt allows.
func (q *schedulingQueue) moveAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.moveSeq++
	for _, e := range q.pods {
		if e.state == stateWaiting {
			q.hurry(e)
		}
	}
	q.flushLocked()
}

// flush moves waiting pods whose retry time has come to the active heap.
func (q *schedulingQueue) flush() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.flushLocked()
}

// close wakes pop for good.
func (q *schedulingQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

func (q *schedulingQueue) hurry(e *queuedPod) {
	if soon := e.lastTry.Add(initialBackoff); soon.Before(e.readyAt) {
		e.readyAt = soon
	}
}

func (q *schedulingQueue) flushLocked() {
	now := q.clock.Now()
	for _, e := range q.pods {
		if e.state == stateWaiting && !e.readyAt.After(now) {
			q.push(e)
		}
	}
}

func (q *schedulingQueue) push(e *queuedPod) {
	e.state = stateActive
	heap.Push(&q.active, e)
	q.cond.Signal()
}

// podHeap orders active pods: higher priority first, then older, then by key.
type podHeap []*queuedPod

func (h podHeap) Len() int { return len(h) }
func (h podHeap) Less(i, j int) bool {
	a, b := h[i].pod, h[j].pod
	if pa, pb := priority(a), priority(b); pa != pb {
		return pa > pb
	}
	if ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time; !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return h[i].key < h[j].key
}
func (h podHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *podHeap) Push(x any) {
	e := x.(*queuedPod)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *podHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}

func priority(pod *v1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}
