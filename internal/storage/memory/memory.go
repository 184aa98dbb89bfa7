// Package memory is an in-memory storage.Interface for unit tests of packages built on the
// store. It keeps etcd's semantics: one revision counter that every successful write
// advances by one, a multi-version history that List and Watch can read at past
// revisions until Compact discards it, and periodic progress events on idle watches.
package memory

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tranche/tranche/internal/storage"
)

// DefaultProgressInterval is the progress interval New uses when given zero.
const DefaultProgressInterval = 5 * time.Second

// errClosed is returned by every method after Close.
var errClosed = errors.New("memory store closed")

// version is one state of a key; a tombstone records its deletion.
type version struct {
	rev int64
	// seq orders the writes of one transaction, as etcd orders their events.
	seq        int
	createRev  int64
	value      []byte
	tombstone  bool
	prevValue  []byte
	prevExists bool
}

// Store is an in-memory storage.Interface. The zero value is not usable; call New.
type Store struct {
	progressInterval time.Duration

	mu sync.Mutex
	// rev is the current revision; etcd starts an empty store at 1.
	rev int64
	// compacted is the oldest revision still readable (1 before any compaction).
	compacted int64
	// keys holds each key's versions in revision order.
	keys     map[string][]version
	watchers map[*watcher]struct{}
	closed   bool
	done     chan struct{}
}

var _ storage.Interface = (*Store)(nil)

// New returns an empty store at revision 1. Idle watches get a Progress event every
// progressInterval (0: DefaultProgressInterval); tests pass a few milliseconds.
func New(progressInterval time.Duration) *Store {
	if progressInterval <= 0 {
		progressInterval = DefaultProgressInterval
	}
	return &Store{
		progressInterval: progressInterval,
		rev:              1,
		compacted:        1,
		keys:             map[string][]version{},
		watchers:         map[*watcher]struct{}{},
		done:             make(chan struct{}),
	}
}

// at returns the key's state at rev, or false when it did not exist then.
func (s *Store) at(key string, rev int64) (version, bool) {
	versions := s.keys[key]
	i := sort.Search(len(versions), func(i int) bool { return versions[i].rev > rev })
	if i == 0 || versions[i-1].tombstone {
		return version{}, false
	}
	return versions[i-1], true
}

// Get implements storage.Interface.
func (s *Store) Get(_ context.Context, key string) (*storage.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	v, ok := s.at(key, s.rev)
	if !ok {
		return nil, &storage.KeyError{Key: key, Err: storage.ErrNotFound}
	}
	kv := toKeyValue(key, v)
	return &kv, nil
}

// List implements storage.Interface.
func (s *Store) List(_ context.Context, prefix string, opts storage.ListOptions) (*storage.ListResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	rev := opts.Revision
	if rev <= 0 {
		rev = s.rev
	}
	if rev < s.compacted {
		return nil, fmt.Errorf("list %q at revision %d (compacted up to %d): %w", prefix, rev, s.compacted, storage.ErrCompacted)
	}
	if rev > s.rev {
		return nil, fmt.Errorf("list %q at revision %d: a future revision (current %d)", prefix, rev, s.rev)
	}
	var keys []string
	for key := range s.keys {
		if strings.HasPrefix(key, prefix) && key >= opts.StartKey {
			if _, ok := s.at(key, rev); ok {
				keys = append(keys, key)
			}
		}
	}
	slices.Sort(keys)
	result := &storage.ListResult{Revision: rev, Items: []storage.KeyValue{}}
	if opts.Limit > 0 && int64(len(keys)) > opts.Limit {
		result.More = true
		result.RemainingCount = int64(len(keys)) - opts.Limit
		keys = keys[:opts.Limit]
	}
	for _, key := range keys {
		v, _ := s.at(key, rev)
		result.Items = append(result.Items, toKeyValue(key, v))
	}
	return result, nil
}

// Create implements storage.Interface.
func (s *Store) Create(_ context.Context, key string, value []byte, ops ...storage.Op) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errClosed
	}
	if _, ok := s.at(key, s.rev); ok {
		return 0, &storage.KeyError{Key: key, Err: storage.ErrExists}
	}
	if err := s.checkOps(key, ops); err != nil {
		return 0, err
	}
	s.commit(key, value, false, ops)
	return s.rev, nil
}

// Update implements storage.Interface.
func (s *Store) Update(_ context.Context, key string, value []byte, expectRevision int64, ops ...storage.Op) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errClosed
	}
	cur, ok := s.at(key, s.rev)
	if !ok {
		return 0, &storage.KeyError{Key: key, Err: storage.ErrNotFound}
	}
	if cur.rev != expectRevision {
		return 0, &storage.KeyError{Key: key, Err: storage.ErrConflict}
	}
	if err := s.checkOps(key, ops); err != nil {
		return 0, err
	}
	s.commit(key, value, false, ops)
	return s.rev, nil
}

// Delete implements storage.Interface.
func (s *Store) Delete(_ context.Context, key string, expectRevision int64, ops ...storage.Op) (*storage.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	cur, ok := s.at(key, s.rev)
	if !ok {
		return nil, &storage.KeyError{Key: key, Err: storage.ErrNotFound}
	}
	if expectRevision != 0 && cur.rev != expectRevision {
		return nil, &storage.KeyError{Key: key, Err: storage.ErrConflict}
	}
	if err := s.checkOps(key, ops); err != nil {
		return nil, err
	}
	s.commit(key, nil, true, ops)
	kv := toKeyValue(key, cur)
	kv.ModRevision = s.rev
	return &kv, nil
}

// checkOps enforces the extra ops' conditions and etcd's rule that a transaction writes
// each key at most once.
func (s *Store) checkOps(key string, ops []storage.Op) error {
	seen := map[string]bool{key: true}
	for _, op := range ops {
		if seen[op.Key] {
			return fmt.Errorf("key %q written twice in one transaction", op.Key)
		}
		seen[op.Key] = true
	}
	for _, op := range ops {
		if _, ok := s.at(op.Key, s.rev); op.MustNotExist && ok {
			return &storage.KeyError{Key: op.Key, Err: storage.ErrExists}
		}
	}
	return nil
}

// commit applies the main write and the ops at one new revision and queues their events
// to the watches. Deleting an absent key is no change, as in etcd.
func (s *Store) commit(key string, value []byte, del bool, ops []storage.Op) {
	s.rev++
	var events []storage.Event
	write := func(key string, value []byte, del bool) {
		prev, existed := s.at(key, s.rev-1)
		if del && !existed {
			return
		}
		value = bytes.Clone(value)
		v := version{rev: s.rev, seq: len(events), createRev: s.rev, value: value, tombstone: del}
		ev := storage.Event{Type: storage.Added, Key: key, Value: value, Revision: s.rev}
		if existed {
			v.createRev = prev.createRev
			v.prevValue, v.prevExists = prev.value, true
			ev.Type, ev.PrevValue = storage.Modified, prev.value
		}
		if del {
			ev.Type, ev.Value = storage.Deleted, nil
		}
		s.keys[key] = append(s.keys[key], v)
		events = append(events, ev)
	}
	for _, op := range ops {
		write(op.Key, op.Value, op.Delete)
	}
	write(key, value, del)
	for w := range s.watchers {
		w.enqueue(events)
	}
}

// Watch implements storage.Interface.
func (s *Store) Watch(ctx context.Context, prefix string, fromRevision int64) (<-chan storage.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	w := &watcher{prefix: prefix, wake: make(chan struct{}, 1)}
	out := make(chan storage.Event)
	if fromRevision <= 0 {
		fromRevision = s.rev
	}
	if fromRevision+1 < s.compacted {
		w.pending = []storage.Event{{Type: storage.Error, Err: fmt.Errorf("watch %q from revision %d (compacted up to %d): %w",
			prefix, fromRevision, s.compacted, storage.ErrCompacted)}}
		w.wake <- struct{}{}
		go s.run(ctx, w, out)
		return out, nil
	}
	w.enqueue(s.history(fromRevision + 1))
	s.watchers[w] = struct{}{}
	go s.run(ctx, w, out)
	return out, nil
}

// history returns the events at revisions >= from, in revision order.
func (s *Store) history(from int64) []storage.Event {
	type entry struct {
		ev  storage.Event
		seq int
	}
	var entries []entry
	for key, versions := range s.keys {
		for _, v := range versions {
			if v.rev < from {
				continue
			}
			ev := storage.Event{Type: storage.Added, Key: key, Value: v.value, Revision: v.rev}
			if v.prevExists {
				ev.Type, ev.PrevValue = storage.Modified, v.prevValue
			}
			if v.tombstone {
				ev.Type, ev.Value = storage.Deleted, nil
			}
			entries = append(entries, entry{ev: ev, seq: v.seq})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if a.ev.Revision != b.ev.Revision {
			return cmp.Compare(a.ev.Revision, b.ev.Revision)
		}
		return cmp.Compare(a.seq, b.seq)
	})
	events := make([]storage.Event, len(entries))
	for i, e := range entries {
		events[i] = e.ev
	}
	return events
}

// run delivers a watcher's events until ctx ends, the store closes, or an Error event
// was sent.
func (s *Store) run(ctx context.Context, w *watcher, out chan<- storage.Event) {
	defer close(out)
	defer func() {
		s.mu.Lock()
		delete(s.watchers, w)
		s.mu.Unlock()
	}()
	ticker := time.NewTicker(s.progressInterval)
	defer ticker.Stop()
	for {
		var batch []storage.Event
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-w.wake:
			s.mu.Lock()
			batch, w.pending = w.pending, nil
			s.mu.Unlock()
		case <-ticker.C:
			s.mu.Lock()
			// Nothing pending under the lock means every event up to s.rev was delivered.
			if len(w.pending) == 0 {
				batch = []storage.Event{{Type: storage.Progress, Revision: s.rev}}
			}
			s.mu.Unlock()
		}
		for _, ev := range batch {
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			case <-s.done:
				return
			}
			if ev.Type == storage.Error {
				return
			}
		}
	}
}

// Compact implements storage.Interface: history before revision is discarded, and
// compacting at or below an earlier compaction gives ErrCompacted, as in etcd.
func (s *Store) Compact(_ context.Context, revision int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if revision <= s.compacted {
		return fmt.Errorf("compact at revision %d (compacted up to %d): %w", revision, s.compacted, storage.ErrCompacted)
	}
	if revision > s.rev {
		return fmt.Errorf("compact at revision %d: a future revision (current %d)", revision, s.rev)
	}
	for key, versions := range s.keys {
		// Keep the last version before revision: it is the key's state at revision.
		i := sort.Search(len(versions), func(i int) bool { return versions[i].rev >= revision })
		if i > 0 {
			keep := i - 1
			if versions[keep].tombstone {
				keep = i
			}
			versions = versions[keep:]
		}
		if len(versions) == 0 {
			delete(s.keys, key)
			continue
		}
		s.keys[key] = versions
	}
	s.compacted = revision
	return nil
}

// Revision implements storage.Interface.
func (s *Store) Revision(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errClosed
	}
	return s.rev, nil
}

// Close implements storage.Interface: every watch channel closes and later calls fail.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	return nil
}

// watcher is one Watch: the events queued for it and a wake-up for its goroutine. Writers
// never block on a slow reader; the queue grows instead.
type watcher struct {
	prefix  string
	pending []storage.Event
	wake    chan struct{}
}

// enqueue adds the events under the watcher's prefix; the store's lock must be held.
func (w *watcher) enqueue(events []storage.Event) {
	added := false
	for _, ev := range events {
		if strings.HasPrefix(ev.Key, w.prefix) {
			w.pending = append(w.pending, ev)
			added = true
		}
	}
	if added {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// toKeyValue converts a stored version of key.
func toKeyValue(key string, v version) storage.KeyValue {
	return storage.KeyValue{Key: key, Value: bytes.Clone(v.value), ModRevision: v.rev, CreateRevision: v.createRev}
}
