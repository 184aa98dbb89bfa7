package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func TestLoopRetriesThenDrops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Millisecond))
	var mu sync.Mutex
	calls := map[string]int{}
	sync := func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		if key == "flaky" && calls[key] < 3 || key == "broken" {
			return errors.New("not yet")
		}
		return nil
	}
	l := Loop{Kind: "Thing", Queue: q, Sync: sync, MaxRetries: 4, Logger: slog.New(slog.DiscardHandler)}
	go l.Run(ctx, 2)
	q.Add("flaky")
	q.Add("broken")
	q.Add("fine")
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		done := calls["flaky"] == 3 && calls["broken"] == 5 && calls["fine"] == 1
		got := map[string]int{"flaky": calls["flaky"], "broken": calls["broken"], "fine": calls["fine"]}
		mu.Unlock()
		if done && q.Len() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls %v: want flaky 3 (two failures, then success), broken 5 (the first try and 4 retries), fine 1", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if calls["broken"] != 5 || calls["flaky"] != 3 {
		t.Fatalf("a key was synced again after success or after its budget: %v", calls)
	}
}

// TestRunWaitsForSyncsUnderWay: Run returns only once a sync that was running when the
// context ended has returned, so nothing writes after the controller stopped.
func TestRunWaitsForSyncsUnderWay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	started, release := make(chan struct{}), make(chan struct{})
	sync := func(context.Context, string) error {
		close(started)
		<-release
		return nil
	}
	returned := make(chan struct{})
	go func() {
		Loop{Kind: "Thing", Queue: q, Sync: sync, MaxRetries: 1, Logger: slog.New(slog.DiscardHandler)}.Run(ctx, 1)
		close(returned)
	}()
	q.Add("slow")
	<-started
	cancel()
	select {
	case <-returned:
		t.Fatal("Run returned while a sync was under way")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the sync did")
	}
}
