package resync

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLoop: a sync at once, one per wake-up, retries backing off from one second after
// failures and reset by a success, and nothing after ctx ends.
func TestLoop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan struct{})
	calls := make(chan int, 16)
	n := 0
	var retries []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop(ctx, wake, time.Hour, func() error {
			n++
			calls <- n
			if n == 2 || n == 3 {
				return errors.New("down")
			}
			return nil
		}, func(_ error, retry time.Duration) { retries = append(retries, retry) })
	}()
	next := func(want int) {
		t.Helper()
		select {
		case got := <-calls:
			if got != want {
				t.Fatalf("call %d, want %d", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no call %d", want)
		}
	}
	next(1) // at once
	wake <- struct{}{}
	next(2) // woken, fails: retry after 1 s
	next(3) // the retry, fails: retry after 2 s
	next(4) // the retry succeeds
	cancel()
	<-done
	if len(retries) != 2 || retries[0] != time.Second || retries[1] != 2*time.Second {
		t.Errorf("retries %v, want [1s 2s]", retries)
	}
	select {
	case got := <-calls:
		t.Errorf("call %d after ctx ended", got)
	default:
	}
}
