package writetrack

import "testing"

// cache is an informer cache as Stale reads it: name → resourceVersion.
type cache map[string]string

func (c cache) get(name string) (string, bool) {
	rv, ok := c[name]
	return rv, ok
}

func TestTracker(t *testing.T) {
	t.Run("own write seen through its event", func(t *testing.T) {
		tr := New()
		tr.Wrote("ns/svc", "a", "5")
		if !tr.Stale("ns/svc", cache{}.get) {
			t.Fatal("a write the cache does not show yet is not stale")
		}
		if !tr.Seen("ns/svc", "a", "5") {
			t.Fatal("the write's own event was not recognised")
		}
		if tr.Stale("ns/svc", cache{}.get) {
			t.Fatal("stale after the event")
		}
	})
	t.Run("event before the write was recorded", func(t *testing.T) {
		// The informer delivered the slice before Create returned: Seen found
		// nothing, and the entry recorded afterwards must not keep the key stale
		// once the cache shows that version or a newer one.
		tr := New()
		if tr.Seen("ns/svc", "a", "5") {
			t.Fatal("an event with nothing pending taken as ours")
		}
		tr.Wrote("ns/svc", "a", "5")
		if tr.Stale("ns/svc", cache{"a": "5"}.get) {
			t.Fatal("stale although the cache shows the write")
		}
		tr.Wrote("ns/svc", "a", "7")
		if !tr.Stale("ns/svc", cache{"a": "6"}.get) {
			t.Fatal("not stale although the cache holds an older version")
		}
		if tr.Stale("ns/svc", cache{"a": "8"}.get) {
			t.Fatal("stale although the cache holds a newer version")
		}
	})
	t.Run("deletions", func(t *testing.T) {
		tr := New()
		tr.Deleting("ns/svc", "a")
		if !tr.Stale("ns/svc", cache{"a": "3"}.get) {
			t.Fatal("a deletion the cache does not show yet is not stale")
		}
		if !tr.Gone("ns/svc", "a") {
			t.Fatal("own deletion not recognised")
		}
		tr.Deleting("ns/svc", "b")
		if tr.Stale("ns/svc", cache{}.get) {
			t.Fatal("stale although the cache no longer has the object")
		}
		if tr.Gone("ns/svc", "c") {
			t.Fatal("a deletion by someone else taken as ours")
		}
	})
	t.Run("forget", func(t *testing.T) {
		tr := New()
		tr.Wrote("ns/svc", "a", "5")
		tr.Forget("ns/svc")
		if tr.Stale("ns/svc", cache{}.get) {
			t.Fatal("stale after Forget")
		}
	})
}
