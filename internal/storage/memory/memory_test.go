package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/storage"
	"github.com/tranche/tranche/internal/storage/memory"
	"github.com/tranche/tranche/internal/storage/storagetest"
)

func TestMain(m *testing.M) { storagetest.Main(m) }

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Interface {
		s := memory.New(time.Hour)
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestProgressOnIdleWatch(t *testing.T) {
	s := memory.New(5 * time.Millisecond)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rev, err := s.Create(ctx, "/other/a", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "/idle/", 0)
	if err != nil {
		t.Fatal(err)
	}
	// A write outside the prefix still advances the revision progress reports.
	rev2, err := s.Create(ctx, "/other/b", []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	for ev := range w {
		if ev.Type != storage.Progress {
			t.Fatalf("event %+v, want only progress", ev)
		}
		if ev.Revision == rev2 {
			return
		}
		if ev.Revision != rev {
			t.Fatalf("progress at revision %d, want %d or %d", ev.Revision, rev, rev2)
		}
	}
	t.Fatal("watch closed before a progress event at the latest revision")
}

func TestCloseEndsWatchesAndCalls(t *testing.T) {
	s := memory.New(time.Hour)
	ctx := context.Background()
	w, err := s.Watch(ctx, "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-w:
		if ok {
			t.Fatal("event after Close, want the channel closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch still open after Close")
	}
	if _, err := s.Create(ctx, "/a", nil); err == nil {
		t.Fatal("Create after Close succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestValuesAreCopied(t *testing.T) {
	s := memory.New(time.Hour)
	defer s.Close()
	ctx := context.Background()
	value := []byte("abc")
	if _, err := s.Create(ctx, "/a", value); err != nil {
		t.Fatal(err)
	}
	value[0] = 'X'
	kv, err := s.Get(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	kv.Value[1] = 'Y'
	kv, _ = s.Get(ctx, "/a")
	if string(kv.Value) != "abc" {
		t.Fatalf("stored value %q changed through caller slices, want %q", kv.Value, "abc")
	}
	if _, err := s.Update(ctx, "/a", []byte("x"), kv.ModRevision, storage.Op{Key: "/a", Value: []byte("dup")}); err == nil || errors.Is(err, storage.ErrConflict) {
		t.Fatalf("writing one key twice in a transaction: %v, want a plain error", err)
	}
}
