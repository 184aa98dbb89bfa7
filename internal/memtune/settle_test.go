package memtune

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"
)

// sink keeps the burst's allocation from being optimised away.
var sink []byte

// TestSettleReturnsABurst: memory a burst touched and then dropped leaves the resident
// set once the process has stopped growing, without waiting for the runtime's slow
// background scavenger.
func TestSettleReturnsABurst(t *testing.T) {
	runtime.GC()
	before := residentBytes()
	if before == 0 {
		t.Skip("no /proc/self/statm")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		settleEvery(ctx, slog.New(slog.DiscardHandler), 20*time.Millisecond)
	}()
	time.Sleep(50 * time.Millisecond)
	const burst = 256 << 20
	sink = make([]byte, burst)
	for i := 0; i < len(sink); i += 4096 {
		sink[i] = 1
	}
	peak := residentBytes()
	if peak < before+burst/2 {
		t.Fatalf("the burst did not show in the resident set: %d then %d bytes", before, peak)
	}
	sink = nil
	runtime.GC()
	deadline := time.Now().Add(10 * time.Second)
	for residentBytes() > before+burst/4 {
		if time.Now().After(deadline) {
			t.Fatalf("resident set still %d bytes after the burst (before %d, peak %d)", residentBytes(), before, peak)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}
