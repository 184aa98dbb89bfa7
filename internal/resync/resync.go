// Package resync runs the level-triggered loops of the node's network programs (the
// overlay, the load-balancer announcer): sync everything from the informers' state at
// once, again on every wake-up and at least every resync period, and after a failure
// again sooner, backing off from one second up to the resync period.
package resync

import (
	"context"
	"time"
)

// firstRetry is the first wait after a failed sync; it doubles up to the resync period.
const firstRetry = time.Second

// Loop calls sync at once, then on each receive from wake and when every has passed
// since the last call, until ctx ends. After a failure it calls failed with the error
// and the wait before the next try (1 s, doubling up to every), and the next call
// comes after that wait or on the next wake-up, whichever is first.
func Loop(ctx context.Context, wake <-chan struct{}, every time.Duration, sync func() error, failed func(err error, retry time.Duration)) {
	retry := firstRetry
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-timer.C:
		}
		next := every
		if err := sync(); err != nil {
			failed(err, retry)
			next, retry = retry, min(2*retry, every)
		} else {
			retry = firstRetry
		}
		timer.Reset(next)
	}
}
