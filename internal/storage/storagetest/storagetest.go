// Package storagetest is the conformance suite every storage.Interface implementation
// passes: the in-memory fake, embedded etcd and an external etcd run the same cases, so
// the fake cannot drift from the real thing.
package storagetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche/tranche/internal/storage"
)

// eventTimeout bounds every wait for a watch event.
const eventTimeout = 5 * time.Second

// Run runs the suite. newStore is called once per subtest; it may return a fresh store
// or a view of a shared one, because every case writes only under its own key prefix,
// asserts revisions relative to what it wrote, and only compacts revisions it made.
// newStore arranges the store's cleanup itself.
func Run(t *testing.T, newStore func(t *testing.T) storage.Interface) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tc.run(ctx, t, &fixture{s: s, prefix: "/storagetest/" + t.Name() + "/"})
		})
	}
}

// fixture is a store with the subtest's key prefix and failing helpers.
type fixture struct {
	s      storage.Interface
	prefix string
}

// key returns the subtest's key for name.
func (f *fixture) key(name string) string { return f.prefix + name }

// outside returns a key next to the subtest's prefix but not under it.
func (f *fixture) outside(name string) string { return strings.TrimSuffix(f.prefix, "/") + "-" + name }

func (f *fixture) create(ctx context.Context, t *testing.T, name, value string, ops ...storage.Op) int64 {
	t.Helper()
	rev, err := f.s.Create(ctx, f.key(name), []byte(value), ops...)
	if err != nil {
		t.Fatalf("Create(%s): %v", name, err)
	}
	return rev
}

func (f *fixture) update(ctx context.Context, t *testing.T, name, value string, expect int64) int64 {
	t.Helper()
	rev, err := f.s.Update(ctx, f.key(name), []byte(value), expect)
	if err != nil {
		t.Fatalf("Update(%s): %v", name, err)
	}
	return rev
}

func (f *fixture) del(ctx context.Context, t *testing.T, name string) int64 {
	t.Helper()
	kv, err := f.s.Delete(ctx, f.key(name), 0)
	if err != nil {
		t.Fatalf("Delete(%s): %v", name, err)
	}
	return kv.ModRevision
}

func (f *fixture) revision(ctx context.Context, t *testing.T) int64 {
	t.Helper()
	rev, err := f.s.Revision(ctx)
	if err != nil {
		t.Fatalf("Revision: %v", err)
	}
	return rev
}

// wantValue fails unless name holds value.
func (f *fixture) wantValue(ctx context.Context, t *testing.T, name, value string) {
	t.Helper()
	kv, err := f.s.Get(ctx, f.key(name))
	if err != nil {
		t.Fatalf("Get(%s): %v", name, err)
	}
	if string(kv.Value) != value {
		t.Fatalf("Get(%s) = %q, want %q", name, kv.Value, value)
	}
}

// wantAbsent fails unless Get(name) gives ErrNotFound.
func (f *fixture) wantAbsent(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	_, err := f.s.Get(ctx, f.key(name))
	wantKeyError(t, err, f.key(name), storage.ErrNotFound)
}

// wantKeyError fails unless err is a *storage.KeyError for key wrapping target.
func wantKeyError(t *testing.T, err error, key string, target error) {
	t.Helper()
	var ke *storage.KeyError
	if !errors.As(err, &ke) || !errors.Is(err, target) || ke.Key != key {
		t.Fatalf("error = %v, want KeyError{%q, %v}", err, key, target)
	}
}

// items renders a list page as "key=value@modRevision" strings relative to the prefix.
func (f *fixture) items(res *storage.ListResult) []string {
	out := []string{}
	for _, kv := range res.Items {
		out = append(out, fmt.Sprintf("%s=%s@%d", strings.TrimPrefix(kv.Key, f.prefix), kv.Value, kv.ModRevision))
	}
	return out
}

// nextEvent returns the next non-progress event, failing after eventTimeout.
func nextEvent(t *testing.T, ch <-chan storage.Event) storage.Event {
	t.Helper()
	timer := time.NewTimer(eventTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed, want an event")
			}
			if ev.Type != storage.Progress {
				return ev
			}
		case <-timer.C:
			t.Fatal("no watch event within", eventTimeout)
		}
	}
}

// wantClosed fails unless ch closes within eventTimeout; events before the close are
// dropped.
func wantClosed(t *testing.T, ch <-chan storage.Event) {
	t.Helper()
	timer := time.NewTimer(eventTimeout)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatal("watch channel still open after", eventTimeout)
		}
	}
}

// event is a watch event in comparable form: key relative to the prefix, strings for
// values, error left out.
type event struct {
	Type      storage.EventType
	Key       string
	Value     string
	PrevValue string
	Revision  int64
}

func (f *fixture) event(ev storage.Event) event {
	return event{Type: ev.Type, Key: strings.TrimPrefix(ev.Key, f.prefix), Value: string(ev.Value), PrevValue: string(ev.PrevValue), Revision: ev.Revision}
}

// cases are the suite's subtests, in the order they run.
var cases = []struct {
	name string
	run  func(ctx context.Context, t *testing.T, f *fixture)
}{
	{"get missing key", func(ctx context.Context, t *testing.T, f *fixture) {
		f.wantAbsent(ctx, t, "missing")
	}},
	{"create then get", func(ctx context.Context, t *testing.T, f *fixture) {
		before := f.revision(ctx, t)
		rev := f.create(ctx, t, "a", "one")
		if rev <= before {
			t.Fatalf("Create revision %d, want > %d", rev, before)
		}
		kv, err := f.s.Get(ctx, f.key("a"))
		if err != nil {
			t.Fatal(err)
		}
		want := &storage.KeyValue{Key: f.key("a"), Value: []byte("one"), ModRevision: rev, CreateRevision: rev}
		if diff := cmp.Diff(want, kv); diff != "" {
			t.Fatalf("Get (-want +got):\n%s", diff)
		}
		if got := f.revision(ctx, t); got != rev {
			t.Fatalf("Revision = %d, want %d", got, rev)
		}
	}},
	{"stale reads of one member", func(ctx context.Context, t *testing.T, f *fixture) {
		// One member (or the fake) has applied what it acknowledged: reads that allow
		// stale state see the writes, at the same revisions.
		rev := f.create(ctx, t, "a", "one")
		f.create(ctx, t, "b", "two")
		last := f.update(ctx, t, "a", "uno", rev)
		stale := storage.WithStaleReads(ctx)
		if !storage.StaleReadsAllowed(stale) || storage.StaleReadsAllowed(ctx) {
			t.Fatal("WithStaleReads does not mark its context alone")
		}
		kv, err := f.s.Get(stale, f.key("a"))
		if err != nil || string(kv.Value) != "uno" || kv.ModRevision != last {
			t.Fatalf("stale Get: %+v, %v; want uno at %d", kv, err, last)
		}
		l, err := f.s.List(stale, f.prefix, storage.ListOptions{})
		if err != nil || len(l.Items) != 2 || l.Revision < last {
			t.Fatalf("stale List: %+v, %v; want a and b at %d or later", l, err, last)
		}
		old, err := f.s.List(stale, f.prefix, storage.ListOptions{Revision: rev})
		if err != nil || len(old.Items) != 1 || string(old.Items[0].Value) != "one" {
			t.Fatalf("stale List at revision %d: %+v, %v; want a=one alone", rev, old, err)
		}
		if got, err := f.s.Revision(stale); err != nil || got < last {
			t.Fatalf("stale Revision = %d, %v; want %d or later", got, err, last)
		}
	}},
	{"create existing key", func(ctx context.Context, t *testing.T, f *fixture) {
		f.create(ctx, t, "a", "one")
		rev := f.revision(ctx, t)
		_, err := f.s.Create(ctx, f.key("a"), []byte("two"))
		wantKeyError(t, err, f.key("a"), storage.ErrExists)
		f.wantValue(ctx, t, "a", "one")
		if got := f.revision(ctx, t); got != rev {
			t.Fatalf("failed Create moved the revision from %d to %d", rev, got)
		}
	}},
	{"update compares revision", func(ctx context.Context, t *testing.T, f *fixture) {
		created := f.create(ctx, t, "a", "one")
		updated := f.update(ctx, t, "a", "two", created)
		if updated <= created {
			t.Fatalf("Update revision %d, want > %d", updated, created)
		}
		kv, err := f.s.Get(ctx, f.key("a"))
		if err != nil {
			t.Fatal(err)
		}
		want := &storage.KeyValue{Key: f.key("a"), Value: []byte("two"), ModRevision: updated, CreateRevision: created}
		if diff := cmp.Diff(want, kv); diff != "" {
			t.Fatalf("Get after Update (-want +got):\n%s", diff)
		}
		for _, tc := range []struct {
			name   string
			key    string
			expect int64
			want   error
		}{
			{"stale revision", "a", created, storage.ErrConflict},
			{"future revision", "a", updated + 100, storage.ErrConflict},
			{"zero revision", "a", 0, storage.ErrConflict},
			{"absent key", "missing", created, storage.ErrNotFound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := f.s.Update(ctx, f.key(tc.key), []byte("three"), tc.expect)
				wantKeyError(t, err, f.key(tc.key), tc.want)
			})
		}
		f.wantValue(ctx, t, "a", "two")
		f.wantAbsent(ctx, t, "missing")
	}},
	{"delete preconditions", func(ctx context.Context, t *testing.T, f *fixture) {
		created := f.create(ctx, t, "a", "one")
		_, err := f.s.Delete(ctx, f.key("a"), created+100)
		wantKeyError(t, err, f.key("a"), storage.ErrConflict)
		_, err = f.s.Delete(ctx, f.key("missing"), 0)
		wantKeyError(t, err, f.key("missing"), storage.ErrNotFound)
		_, err = f.s.Delete(ctx, f.key("missing"), created)
		wantKeyError(t, err, f.key("missing"), storage.ErrNotFound)
		f.wantValue(ctx, t, "a", "one")

		kv, err := f.s.Delete(ctx, f.key("a"), created)
		if err != nil {
			t.Fatal(err)
		}
		rev := f.revision(ctx, t)
		want := &storage.KeyValue{Key: f.key("a"), Value: []byte("one"), ModRevision: rev, CreateRevision: created}
		if diff := cmp.Diff(want, kv); diff != "" {
			t.Fatalf("Delete (-want +got):\n%s", diff)
		}
		f.wantAbsent(ctx, t, "a")
		_, err = f.s.Delete(ctx, f.key("a"), 0)
		wantKeyError(t, err, f.key("a"), storage.ErrNotFound)

		f.create(ctx, t, "b", "one")
		if _, err := f.s.Delete(ctx, f.key("b"), 0); err != nil {
			t.Fatalf("unconditional Delete: %v", err)
		}
		f.wantAbsent(ctx, t, "b")
	}},
	{"extra ops commit with the main write", func(ctx context.Context, t *testing.T, f *fixture) {
		f.create(ctx, t, "gone", "x")
		rev := f.create(ctx, t, "obj", "o1",
			storage.Op{Key: f.key("alloc"), Value: []byte("a1"), MustNotExist: true},
			storage.Op{Key: f.key("gone"), Delete: true})
		for _, name := range []string{"obj", "alloc"} {
			kv, err := f.s.Get(ctx, f.key(name))
			if err != nil {
				t.Fatal(err)
			}
			if kv.ModRevision != rev {
				t.Fatalf("%s at revision %d, want %d (one transaction)", name, kv.ModRevision, rev)
			}
		}
		f.wantAbsent(ctx, t, "gone")

		obj, _ := f.s.Get(ctx, f.key("obj"))
		if _, err := f.s.Update(ctx, f.key("obj"), []byte("o2"), obj.ModRevision,
			storage.Op{Key: f.key("alloc2"), Value: []byte("a2"), MustNotExist: true},
			storage.Op{Key: f.key("alloc"), Delete: true}); err != nil {
			t.Fatal(err)
		}
		f.wantValue(ctx, t, "obj", "o2")
		f.wantValue(ctx, t, "alloc2", "a2")
		f.wantAbsent(ctx, t, "alloc")

		obj, _ = f.s.Get(ctx, f.key("obj"))
		if _, err := f.s.Delete(ctx, f.key("obj"), obj.ModRevision, storage.Op{Key: f.key("alloc2"), Delete: true}); err != nil {
			t.Fatal(err)
		}
		f.wantAbsent(ctx, t, "obj")
		f.wantAbsent(ctx, t, "alloc2")
	}},
	{"failed MustNotExist op writes nothing", func(ctx context.Context, t *testing.T, f *fixture) {
		f.create(ctx, t, "taken", "t")
		existing := f.create(ctx, t, "existing", "e")
		rev := f.revision(ctx, t)
		taken := storage.Op{Key: f.key("taken"), Value: []byte("mine"), MustNotExist: true}
		side := storage.Op{Key: f.key("side"), Value: []byte("s")}

		_, err := f.s.Create(ctx, f.key("new"), []byte("n"), side, taken)
		wantKeyError(t, err, f.key("taken"), storage.ErrExists)
		_, err = f.s.Update(ctx, f.key("existing"), []byte("e2"), existing, side, taken)
		wantKeyError(t, err, f.key("taken"), storage.ErrExists)
		_, err = f.s.Delete(ctx, f.key("existing"), existing, side, taken)
		wantKeyError(t, err, f.key("taken"), storage.ErrExists)

		f.wantAbsent(ctx, t, "new")
		f.wantAbsent(ctx, t, "side")
		f.wantValue(ctx, t, "taken", "t")
		f.wantValue(ctx, t, "existing", "e")
		if got := f.revision(ctx, t); got != rev {
			t.Fatalf("failed transactions moved the revision from %d to %d", rev, got)
		}
	}},
	{"one key written twice in a transaction", func(ctx context.Context, t *testing.T, f *fixture) {
		rev := f.revision(ctx, t)
		_, err := f.s.Create(ctx, f.key("a"), []byte("a"), storage.Op{Key: f.key("a"), Value: []byte("again")})
		if err == nil || errors.Is(err, storage.ErrExists) {
			t.Fatalf("Create: %v, want an error other than ErrExists", err)
		}
		f.wantAbsent(ctx, t, "a")
		if got := f.revision(ctx, t); got != rev {
			t.Fatalf("failed transaction moved the revision from %d to %d", rev, got)
		}
	}},
	{"list pages with limit and start key", func(ctx context.Context, t *testing.T, f *fixture) {
		var revs []int64
		for _, name := range []string{"l/c", "l/a", "l/e", "l/b", "l/d"} {
			revs = append(revs, f.create(ctx, t, name, strings.TrimPrefix(name, "l/")))
		}
		// Neighbours of the prefix that must not be listed.
		f.create(ctx, t, "l", "x")
		f.create(ctx, t, "l0", "x")
		f.create(ctx, t, "m/a", "x")
		listRev := f.revision(ctx, t)
		at := func(name string) int64 { return revs[strings.Index("caebd", name)] }

		all, err := f.s.List(ctx, f.key("l/"), storage.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{}
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			want = append(want, fmt.Sprintf("l/%s=%s@%d", n, n, at(n)))
		}
		if diff := cmp.Diff(want, f.items(all)); diff != "" {
			t.Fatalf("List (-want +got):\n%s", diff)
		}
		if all.Revision != listRev || all.More || all.RemainingCount != 0 {
			t.Fatalf("List revision %d more %v remaining %d, want %d false 0", all.Revision, all.More, all.RemainingCount, listRev)
		}

		// Writes between pages must not show: later pages read at the first page's revision.
		opts := storage.ListOptions{Limit: 2}
		var got []string
		for page, wantRemaining := range []int64{3, 1, 0} {
			res, err := f.s.List(ctx, f.key("l/"), opts)
			if err != nil {
				t.Fatal(err)
			}
			if page == 0 {
				f.create(ctx, t, "l/bb", "late")
				opts.Revision = res.Revision
			}
			if res.Revision != listRev || res.RemainingCount != wantRemaining || res.More != (wantRemaining > 0) {
				t.Fatalf("page %d: revision %d more %v remaining %d, want %d %v %d",
					page, res.Revision, res.More, res.RemainingCount, listRev, wantRemaining > 0, wantRemaining)
			}
			got = append(got, f.items(res)...)
			opts.StartKey = res.Items[len(res.Items)-1].Key + "\x00"
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("paged List (-want +got):\n%s", diff)
		}

		for _, tc := range []struct {
			name   string
			prefix string
			opts   storage.ListOptions
			want   []string
		}{
			{"start key before prefix", "l/", storage.ListOptions{StartKey: f.key("a"), Limit: 1}, want[:1]},
			{"start key inside prefix", "l/", storage.ListOptions{StartKey: f.key("l/d")}, want[3:]},
			{"start key past prefix", "l/", storage.ListOptions{StartKey: f.key("l0")}, []string{}},
			{"nothing under prefix", "nothing/", storage.ListOptions{}, []string{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tc.opts.Revision = listRev
				res, err := f.s.List(ctx, f.key(tc.prefix), tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, f.items(res)); diff != "" {
					t.Fatalf("List (-want +got):\n%s", diff)
				}
			})
		}
	}},
	{"list at an old revision", func(ctx context.Context, t *testing.T, f *fixture) {
		a1 := f.create(ctx, t, "a", "a1")
		b1 := f.create(ctx, t, "b", "b1")
		old := f.revision(ctx, t)
		a2 := f.update(ctx, t, "a", "a2", a1)
		f.del(ctx, t, "b")
		c1 := f.create(ctx, t, "c", "c1")

		res, err := f.s.List(ctx, f.prefix, storage.ListOptions{Revision: old})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{fmt.Sprintf("a=a1@%d", a1), fmt.Sprintf("b=b1@%d", b1)}
		if diff := cmp.Diff(want, f.items(res)); diff != "" {
			t.Fatalf("List at %d (-want +got):\n%s", old, diff)
		}
		if res.Revision != old {
			t.Fatalf("List at %d reports revision %d", old, res.Revision)
		}
		res, err = f.s.List(ctx, f.prefix, storage.ListOptions{Revision: c1 - 1})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{fmt.Sprintf("a=a2@%d", a2)}, f.items(res)); diff != "" {
			t.Fatalf("List at %d (-want +got):\n%s", c1-1, diff)
		}
	}},
	{"compaction", func(ctx context.Context, t *testing.T, f *fixture) {
		a1 := f.create(ctx, t, "a", "a1")
		f.create(ctx, t, "b", "b1")
		f.del(ctx, t, "b")
		a2 := f.update(ctx, t, "a", "a2", a1)
		f.create(ctx, t, "c", "c1")
		if err := f.s.Compact(ctx, a2); err != nil {
			t.Fatal(err)
		}
		_, err := f.s.List(ctx, f.prefix, storage.ListOptions{Revision: a2 - 1})
		if !errors.Is(err, storage.ErrCompacted) {
			t.Fatalf("List below the compacted revision: %v, want ErrCompacted", err)
		}
		res, err := f.s.List(ctx, f.prefix, storage.ListOptions{Revision: a2})
		if err != nil {
			t.Fatalf("List at the compacted revision: %v", err)
		}
		if diff := cmp.Diff([]string{fmt.Sprintf("a=a2@%d", a2)}, f.items(res)); diff != "" {
			t.Fatalf("List at %d (-want +got):\n%s", a2, diff)
		}
		if err := f.s.Compact(ctx, a2); !errors.Is(err, storage.ErrCompacted) {
			t.Fatalf("Compact again at %d: %v, want ErrCompacted", a2, err)
		}
		// A watch may start right at the compacted revision, not before it.
		w, err := f.s.Watch(ctx, f.prefix, a2-1)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.event(nextEvent(t, w)); got.Revision != a2 {
			t.Fatalf("watch from %d: first event %+v, want revision %d", a2-1, got, a2)
		}
	}},
	{"watch replays history in order", func(ctx context.Context, t *testing.T, f *fixture) {
		start := f.revision(ctx, t)
		a1 := f.create(ctx, t, "a", "a1")
		a2 := f.update(ctx, t, "a", "a2", a1)
		b1 := f.create(ctx, t, "b", "b1", storage.Op{Key: f.key("x"), Value: []byte("x1")})
		if _, err := f.s.Create(ctx, f.outside("o"), []byte("o")); err != nil {
			t.Fatal(err)
		}
		ad := f.del(ctx, t, "a")
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w, err := f.s.Watch(wctx, f.prefix, start)
		if err != nil {
			t.Fatal(err)
		}
		want := []event{
			{Type: storage.Added, Key: "a", Value: "a1", Revision: a1},
			{Type: storage.Modified, Key: "a", Value: "a2", PrevValue: "a1", Revision: a2},
			{Type: storage.Added, Key: "x", Value: "x1", Revision: b1},
			{Type: storage.Added, Key: "b", Value: "b1", Revision: b1},
			{Type: storage.Deleted, Key: "a", PrevValue: "a2", Revision: ad},
		}
		// Live events follow the replay without a gap.
		b2 := f.update(ctx, t, "b", "b2", b1)
		want = append(want, event{Type: storage.Modified, Key: "b", Value: "b2", PrevValue: "b1", Revision: b2})
		var got []event
		for range want {
			got = append(got, f.event(nextEvent(t, w)))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("events (-want +got):\n%s", diff)
		}
	}},
	{"watch from now", func(ctx context.Context, t *testing.T, f *fixture) {
		f.create(ctx, t, "before", "b")
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w, err := f.s.Watch(wctx, f.prefix, 0)
		if err != nil {
			t.Fatal(err)
		}
		rev := f.create(ctx, t, "after", "a")
		want := event{Type: storage.Added, Key: "after", Value: "a", Revision: rev}
		if diff := cmp.Diff(want, f.event(nextEvent(t, w))); diff != "" {
			t.Fatalf("event (-want +got):\n%s", diff)
		}
	}},
	{"watch from a compacted revision", func(ctx context.Context, t *testing.T, f *fixture) {
		start := f.revision(ctx, t)
		a1 := f.create(ctx, t, "a", "a1")
		a2 := f.update(ctx, t, "a", "a2", a1)
		if err := f.s.Compact(ctx, a2); err != nil {
			t.Fatal(err)
		}
		w, err := f.s.Watch(ctx, f.prefix, start)
		if err != nil {
			if !errors.Is(err, storage.ErrCompacted) {
				t.Fatalf("Watch: %v, want ErrCompacted", err)
			}
			return
		}
		ev := nextEvent(t, w)
		if ev.Type != storage.Error || !errors.Is(ev.Err, storage.ErrCompacted) {
			t.Fatalf("event %+v, want an Error event with ErrCompacted", ev)
		}
		wantClosed(t, w)
	}},
	{"watch closes when its context ends", func(ctx context.Context, t *testing.T, f *fixture) {
		wctx, cancel := context.WithCancel(ctx)
		w, err := f.s.Watch(wctx, f.prefix, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.create(ctx, t, "a", "a1")
		cancel()
		wantClosed(t, w)
	}},
	{"concurrent creates of one key", func(ctx context.Context, t *testing.T, f *fixture) {
		const writers = 8
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i := range writers {
			wg.Go(func() {
				_, errs[i] = f.s.Create(ctx, f.key("contended"), fmt.Appendf(nil, "w%d", i))
			})
		}
		wg.Wait()
		var winners []string
		for i, err := range errs {
			switch {
			case err == nil:
				winners = append(winners, fmt.Sprintf("w%d", i))
			default:
				wantKeyError(t, err, f.key("contended"), storage.ErrExists)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("winners %v, want exactly one", winners)
		}
		f.wantValue(ctx, t, "contended", winners[0])
	}},
	{"concurrent updates with one revision", func(ctx context.Context, t *testing.T, f *fixture) {
		rev := f.create(ctx, t, "a", "a0")
		const writers = 8
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i := range writers {
			wg.Go(func() {
				_, errs[i] = f.s.Update(ctx, f.key("a"), fmt.Appendf(nil, "w%d", i), rev)
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
				continue
			}
			wantKeyError(t, err, f.key("a"), storage.ErrConflict)
		}
		if won != 1 {
			t.Fatalf("%d updates succeeded, want exactly one: %v", won, errs)
		}
	}},
}
