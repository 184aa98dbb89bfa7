package apiserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tranche/tranche/internal/storage"
)

// watchCacheCapacity is how many recent events each resource keeps for its watches; a
// watch from an older resourceVersion, or one that falls further behind, ends with an
// ERROR event carrying 410 Gone and relists, as with Kubernetes' watch cache.
const watchCacheCapacity = 2048

// Events older than watchCacheFresh beyond the newest watchCacheKeep are dropped, as
// Kubernetes' watch cache shrinks its history to what is fresh (eventFreshDuration,
// lower bound 100): a burst of writes is not held, decoded and encoded, for ever.
const (
	watchCacheFresh = 75 * time.Second
	watchCacheKeep  = 100
)

// cacheEvent is one storage change, decoded once and shared read-only by every watch.
type cacheEvent struct {
	typ storage.EventType
	key string
	rev int64
	// cur is the new state (nil when deleted), prev the state before (nil when added).
	cur, prev runtime.Object
	// at is when the cache received it.
	at time.Time

	// frames holds the encodings already made of this event for plain watches.
	mu     sync.Mutex
	frames map[frameKey][]byte
}

// frameKey names one encoding of an event: what the watch saw and in which format.
type frameKey struct {
	typ      watch.EventType
	prev     bool
	protobuf bool
}

// frame returns the event encoded for a plain watch, encoding it on first use.
func (ev *cacheEvent) frame(typ watch.EventType, prev, protobuf bool) ([]byte, error) {
	k := frameKey{typ, prev, protobuf}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if data, ok := ev.frames[k]; ok {
		return data, nil
	}
	obj := ev.cur
	if prev {
		obj = ev.prev
	}
	var data []byte
	var err error
	if protobuf {
		data, err = protobufWatchFrame(typ, obj)
	} else {
		data, err = jsonWatchFrame(typ, obj)
	}
	if err != nil {
		return nil, err
	}
	if ev.frames == nil {
		ev.frames = map[frameKey][]byte{}
	}
	ev.frames[k] = data
	return data, nil
}

// watchCache serves every API watch of one resource from a single storage watch of the
// resource's whole prefix: each event is decoded once (and encoded once per format) and
// kept in a ring of recent events, from which each watch reads at its own pace. It
// starts on the first watch, from that watch's resourceVersion, and restarts the same
// way after its storage watch ends. LISTs and initial events are read from storage.
type watchCache struct {
	s      *Server
	e      *entry
	prefix string
	// bg bounds the storage watches: the server's, or a resource's added at run time
	// (cancelled when it stops being served).
	bg context.Context
	// capacity bounds the ring (watchCacheCapacity; tests make it small).
	capacity int

	mu      sync.Mutex
	running bool
	// ring holds the recent events in revision order; every event with a revision
	// above window is in it.
	ring   []*cacheEvent
	window int64
	// started is the revision the current run started from: the window's first value.
	started int64
	// progress is the latest revision storage reported as complete (for bookmarks).
	progress int64
	// changed is closed (and replaced) whenever the cache changes.
	changed chan struct{}
	// gen counts runs; ended is closed when a run ends, with endErr its storage error.
	gen    int64
	ended  chan struct{}
	endErr error
}

func newWatchCache(s *Server, e *entry) *watchCache {
	return &watchCache{s: s, e: e, bg: s.bg, prefix: e.store.prefix(""), capacity: watchCacheCapacity, changed: make(chan struct{})}
}

// cacheCursor is one watch's position in the cache.
type cacheCursor struct {
	c *watchCache
	// rev is the revision of the last event the watch has seen.
	rev   int64
	gen   int64
	ended chan struct{}
}

// open positions a watch after revision from, starting the cache there if it is not
// running. A revision whose events the cache dropped (capacity, freshness) is 410 Gone,
// as with kube-apiserver's cache. A revision from before the cache's run started gets a
// storage watch of its own, for as long as ctx lasts: kube-apiserver's cache starts with
// the server, so a watch from any revision read since then is served, while this one
// starts with its first watch, possibly after a client read the revision it watches from.
func (c *watchCache) open(ctx context.Context, from int64) (*cacheCursor, error) {
	// The read is made unlocked so that the feed never waits for it. (A new run's
	// storage watch would check its start too, but its error does not say how old a
	// start is still served.)
	if err := c.checkNotCompacted(ctx, from); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if !c.running {
		if err := c.startLocked(from); err != nil {
			c.mu.Unlock()
			return nil, err
		}
	}
	if from >= c.window {
		cur := &cacheCursor{c: c, rev: from, gen: c.gen, ended: c.ended}
		c.mu.Unlock()
		return cur, nil
	}
	if from >= c.started {
		window := c.window
		c.mu.Unlock()
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, window))
	}
	c.mu.Unlock()
	// The watch's own storage watch ends with the watch, or with the cache's (server
	// shutdown, resource no longer served).
	bg, stop := context.WithCancel(ctx)
	stopWithCache := context.AfterFunc(c.bg, stop)
	context.AfterFunc(bg, func() { stopWithCache() })
	own := &watchCache{s: c.s, e: c.e, bg: bg, prefix: c.prefix, capacity: c.capacity, changed: make(chan struct{})}
	own.mu.Lock()
	defer own.mu.Unlock()
	if err := own.startLocked(from); err != nil {
		return nil, err
	}
	return &cacheCursor{c: own, rev: from, gen: own.gen, ended: own.ended}, nil
}

// checkNotCompacted refuses a start revision storage has compacted away, as a storage
// watch from it would, although the ring may still hold its events: clients expect 410
// Gone from a compacted revision. An empty read at from+1 (the first revision the watch
// needs) tells, whatever the number of keys; it is skipped when from is the current
// revision (nothing after it can be compacted, and etcd refuses reads in the future).
func (c *watchCache) checkNotCompacted(ctx context.Context, from int64) error {
	// The member's own state is enough to judge compaction, and it still answers
	// while the store has no quorum: a watch of a cached state starts then too.
	ctx = storage.WithStaleReads(ctx)
	rev, err := c.s.cfg.Storage.Revision(ctx)
	if err != nil || from+1 > rev {
		// A failing store fails the watch's own reads too; the ring judges meanwhile.
		return nil
	}
	if !c.compactedAt(ctx, from+1) {
		return nil
	}
	// As kube-apiserver's message, name the oldest resourceVersion a watch can start
	// from: the one before the oldest revision storage still holds, found by bisecting
	// between the compacted from+1 and the current revision (only on this error path).
	lo, hi := from+1, rev
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if c.compactedAt(ctx, mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, hi-1))
}

// compactedAt reports whether storage has compacted revision rev away, with an empty
// read at it.
func (c *watchCache) compactedAt(ctx context.Context, rev int64) bool {
	_, err := c.s.cfg.Storage.List(ctx, c.prefix, storage.ListOptions{Revision: rev, StartKey: c.prefix + "\xff", Limit: 1})
	return errors.Is(err, storage.ErrCompacted)
}

// startLocked opens the storage watch from revision from.
func (c *watchCache) startLocked(from int64) error {
	// A revision in the future (a client's guess) must not become the window every
	// other watch is judged by: the window starts at the latest revision at most.
	if err := c.bg.Err(); err != nil {
		return apierrors.NewServiceUnavailable("the server is shutting down")
	}
	// A member's own revision (a serializable read) bounds it as well and answers
	// without quorum, so the cache's lock is never held on a store that can not commit.
	rev, err := c.s.cfg.Storage.Revision(storage.WithStaleReads(c.bg))
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	from = min(from, rev)
	ctx, cancel := context.WithCancel(c.bg)
	events, err := c.s.cfg.Storage.Watch(ctx, c.prefix, from)
	if err != nil {
		cancel()
		if errors.Is(err, storage.ErrCompacted) {
			return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d", from))
		}
		return apierrors.NewInternalError(err)
	}
	c.running = true
	c.ring = nil
	c.window, c.started = from, from
	c.progress = 0
	c.gen++
	c.ended = make(chan struct{})
	c.endErr = nil
	go c.run(cancel, events, c.gen)
	return nil
}

// run feeds the ring from the storage watch until it ends.
func (c *watchCache) run(cancel context.CancelFunc, events <-chan storage.Event, gen int64) {
	defer cancel()
	var endErr error
	for ev := range events {
		if ev.Type == storage.Error {
			endErr = ev.Err
			break
		}
		c.apply(ev)
	}
	c.mu.Lock()
	if c.gen == gen {
		c.running = false
		c.endErr = endErr
		close(c.ended)
		c.broadcastLocked()
	}
	c.mu.Unlock()
}

// apply adds one storage event to the ring (decoded) or records progress.
func (c *watchCache) apply(ev storage.Event) {
	now := c.s.now()
	if ev.Type == storage.Progress {
		c.mu.Lock()
		c.trimLocked(now)
		c.progress = ev.Revision
		c.broadcastLocked()
		c.mu.Unlock()
		return
	}
	ce := &cacheEvent{typ: ev.Type, key: ev.Key, rev: ev.Revision, at: now}
	if ev.Value != nil {
		if obj, err := c.e.store.decode(ev.Value, ev.Revision); err == nil {
			ce.cur = obj
		}
	}
	if ev.PrevValue != nil {
		if obj, err := c.e.store.decode(ev.PrevValue, ev.Revision); err == nil {
			ce.prev = obj
		}
	}
	c.mu.Lock()
	if len(c.ring) >= c.capacity {
		c.window = c.ring[0].rev
		// Shift rather than wrap: readers get a stable slice of the events they asked
		// for, and the copy is of pointers only.
		copy(c.ring, c.ring[1:])
		c.ring = c.ring[:len(c.ring)-1]
	}
	c.ring = append(c.ring, ce)
	c.trimLocked(now)
	c.broadcastLocked()
	c.mu.Unlock()
}

// trimLocked drops the events older than watchCacheFresh beyond the newest
// watchCacheKeep; the window moves past them (a watch from before it gets 410 Gone).
func (c *watchCache) trimLocked(now time.Time) {
	n := 0
	for n < len(c.ring)-watchCacheKeep && now.Sub(c.ring[n].at) > watchCacheFresh {
		n++
	}
	if n == 0 {
		return
	}
	c.window = c.ring[n-1].rev
	// A new array, so that the dropped events are not kept reachable by the old one.
	c.ring = append(make([]*cacheEvent, 0, len(c.ring)-n), c.ring[n:]...)
}

func (c *watchCache) broadcastLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// next returns the events after the cursor, the latest progress revision, and a channel
// closed on the next change. ended reports a cursor the ring has passed, or a run that
// ended (err then says why, nil when storage closed the watch): the caller sends the
// events returned with it first. A run that ended reports ended with its last events
// too, since nothing will close the changed channel after its end.
func (cur *cacheCursor) next() (events []*cacheEvent, progress int64, changed <-chan struct{}, ended bool, err error) {
	c := cur.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != cur.gen {
		// A later run replaced the one this watch followed.
		return nil, 0, nil, true, nil
	}
	if cur.rev < c.window {
		return nil, 0, nil, true, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", cur.rev, c.window))
	}
	i := sort.Search(len(c.ring), func(i int) bool { return c.ring[i].rev > cur.rev })
	events = append([]*cacheEvent(nil), c.ring[i:]...)
	if !c.running {
		return events, 0, nil, true, c.endErr
	}
	return events, c.progress, c.changed, false, nil
}
