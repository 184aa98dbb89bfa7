package imagestore

import (
	"context"
	"io"
	"time"
)

// lockPollInterval is how often a waiter retries a flock held by someone else. flock(2) cannot
// be interrupted by a context, so waiting polls instead of blocking in the kernel.
const lockPollInterval = 20 * time.Millisecond

// waitLock sleeps one poll interval or until ctx is done.
func waitLock(ctx context.Context) error {
	t := time.NewTimer(lockPollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ctxReader ends a long copy (a big layer) once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
