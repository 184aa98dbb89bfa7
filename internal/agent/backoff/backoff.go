// Package backoff is the CrashLoopBackOff policy: how long the agent waits before
// restarting a container that exited, per container. As in kubelet, the first restart is
// immediate, the next ones wait 10 s, 20 s, 40 s... up to 5 min, and a container that
// ran for 10 minutes since its last restart starts over from the beginning.
package backoff

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Kubelet's crash-loop back-off.
const (
	// DefaultInitial is the first wait.
	DefaultInitial = 10 * time.Second
	// DefaultMax caps the wait.
	DefaultMax = 5 * time.Minute
)

// entry is one container's back-off.
type entry struct {
	window      time.Duration
	lastRestart time.Time
}

// Backoff tracks per-container restart back-off. It is safe for concurrent use.
type Backoff struct {
	clock   clock.PassiveClock
	initial time.Duration
	max     time.Duration

	mu      sync.Mutex
	entries map[string]*entry
}

// New returns kubelet's crash-loop back-off (10 s doubling to 5 min) on clk.
func New(clk clock.PassiveClock) *Backoff {
	return NewWithLimits(clk, DefaultInitial, DefaultMax)
}

// NewWithLimits returns a back-off starting at initial and doubling up to max. A
// container is considered stable, and its back-off forgotten, once it ran 2×max since
// its last restart (10 minutes for kubelet's limits).
func NewWithLimits(clk clock.PassiveClock, initial, max time.Duration) *Backoff {
	return &Backoff{clock: clk, initial: initial, max: max, entries: map[string]*entry{}}
}

// Check is asked when container key exited at finishedAt and is due for a restart. It
// returns wait == 0 when the restart may happen now, and records it (the next window
// doubles); otherwise wait is how long the container stays in CrashLoopBackOff, and
// window the back-off it is serving (for Message).
func (b *Backoff) Check(key string, finishedAt time.Time) (wait, window time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	e, ok := b.entries[key]
	if ok && !b.stable(e, finishedAt) {
		if elapsed := now.Sub(finishedAt); elapsed < e.window {
			return e.window - elapsed, e.window
		}
	}
	switch {
	case !ok || b.stable(e, finishedAt):
		e = &entry{window: b.initial}
		b.entries[key] = e
	default:
		e.window = min(2*e.window, b.max)
	}
	e.lastRestart = now
	return 0, e.window
}

// stable reports whether the container ran long enough after its last restart to
// start its back-off over.
func (b *Backoff) stable(e *entry, finishedAt time.Time) bool {
	return finishedAt.Sub(e.lastRestart) > 2*b.max
}

// Window is the back-off container key is serving, 0 if none.
func (b *Backoff) Window(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		return e.window
	}
	return 0
}

// Forget drops container key's back-off (its pod is gone).
func (b *Backoff) Forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, key)
}

// GC drops the back-off of containers not restarted for 2×max, which a next exit would
// reset anyway; the agent calls it now and then to bound memory.
func (b *Backoff) GC() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	for k, e := range b.entries {
		if now.Sub(e.lastRestart) > 2*b.max {
			delete(b.entries, k)
		}
	}
}

// Key identifies a container of a pod for back-off: pod name, namespace and UID,
// container name, and a hash of the container's spec, so that changing the container
// (a new image) starts its back-off over, as in kubelet.
func Key(pod *v1.Pod, c *v1.Container) string {
	h := fnv.New32a()
	if data, err := json.Marshal(c); err == nil {
		_, _ = h.Write(data)
	}
	name := ""
	if c != nil {
		name = c.Name
	}
	if pod == nil {
		return fmt.Sprintf("__%s_%x", name, h.Sum32())
	}
	return fmt.Sprintf("%s_%s_%s_%s_%x", pod.Name, pod.Namespace, pod.UID, name, h.Sum32())
}

// podRef formats a pod as kubelet's messages do: name_namespace(uid).
func podRef(pod *v1.Pod) string {
	if pod == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// Message is the waiting message of a container in CrashLoopBackOff, kubelet's words:
// "back-off 20s restarting failed container=app pod=web_ns(uid)".
func Message(window time.Duration, container string, pod *v1.Pod) string {
	return fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", window, container, podRef(pod))
}

// EventMessage is the BackOff warning event's message, kubelet's words:
// "Back-off restarting failed container app in pod web_ns(uid)".
func EventMessage(container string, pod *v1.Pod) string {
	return fmt.Sprintf("Back-off restarting failed container %s in pod %s", container, podRef(pod))
}
