package main

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

const (
	// settleInterval is how often a ready process compares its resident set with what
	// it was after the last release.
	settleInterval = 30 * time.Second
	// settleGrowth is the growth over that figure that makes it release memory again.
	settleGrowth = 1.1
)

// settleAfterBursts keeps a ready process's resident set near what its steady work
// needs. A burst of load (a thousand watches, a thousand writes) leaves behind freed
// heap the Go runtime returns to the kernel only slowly, and code pages only the burst
// ran. Every settleInterval, once the resident set has grown by settleGrowth over its
// size after the last release and has stopped growing, the freed heap is returned
// (debug.FreeOSMemory: one GC cycle) and the binary's pages are released again (see
// releaseBinaryPages); the pages the steady work uses fault back in from the page cache.
func settleAfterBursts(ctx context.Context, log *slog.Logger) {
	settleEvery(ctx, log, settleInterval)
}

// settleEvery is settleAfterBursts checking every interval.
func settleEvery(ctx context.Context, log *slog.Logger, interval time.Duration) {
	base := residentBytes()
	last := base
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := residentBytes()
		growing := cur > last
		last = cur
		if base == 0 || float64(cur) <= float64(base)*settleGrowth || growing {
			continue
		}
		debug.FreeOSMemory()
		if err := releaseBinaryPages(); err != nil {
			log.Warn("after a burst", "err", err)
		}
		base = residentBytes()
		last = base
	}
}

// residentBytes is the process's resident set from /proc/self/statm (0 if unreadable).
func residentBytes() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}
