package memtune

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
	// settleInterval is how often a ready process compares its resident set with the
	// smallest it had after a release.
	settleInterval = 30 * time.Second
	// settleMaxInterval bounds the back-off while releases free nothing.
	settleMaxInterval = 4 * time.Minute
	// settleGrowth is the growth over that floor that makes it release memory again.
	settleGrowth = 1.1
	// settleSteady is the growth between two checks below which the resident set
	// counts as no longer growing.
	settleSteady = 1.02
)

// settleAfterBursts keeps a ready process's resident set near what its steady work
// needs. A burst of load (a thousand watches, a thousand writes) leaves behind freed
// heap the Go runtime returns to the kernel only slowly, and code pages only the burst
// ran. Once the resident set is settleGrowth above the smallest it had (after start-up,
// or at a check), and has stopped growing, the freed heap is returned (debug.FreeOSMemory: one GC
// cycle) and the binary's pages are released again (see releaseBinaryPages); the pages
// the steady work uses fault back in from the page cache. While releases free nothing
// (the process holds more live data, or is under steady load), checks back off to
// settleMaxInterval.
func settleAfterBursts(ctx context.Context, log *slog.Logger) {
	settleEvery(ctx, log, settleInterval)
}

// settleEvery is settleAfterBursts checking every interval at first.
func settleEvery(ctx context.Context, log *slog.Logger, interval time.Duration) {
	// floor is the smallest resident set seen: at the start (just after start-up's
	// release) or at a check. The steady work's pages fault back in above it; while that
	// alone exceeds settleGrowth, releases free nothing lasting and checks back off.
	floor := residentBytes()
	var last int64
	measure := false
	wait := interval
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		cur := residentBytes()
		if cur == 0 {
			continue
		}
		if floor == 0 || cur < floor {
			floor = cur
		}
		if measure {
			measure = false
			if float64(cur) <= float64(floor)*settleGrowth {
				wait = interval
			} else {
				wait = min(2*wait, max(settleMaxInterval, interval))
			}
			last = cur
			continue
		}
		growing := last == 0 || float64(cur) > float64(last)*settleSteady
		last = cur
		if float64(cur) <= float64(floor)*settleGrowth || growing {
			continue
		}
		debug.FreeOSMemory()
		if err := releaseBinaryPages(); err != nil {
			log.Warn("after a burst", "err", err)
		}
		measure = true
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
