package ingress

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// LineBuffer batches whole log lines into few writes: the access log writes one line per
// request, and one write(2) to stderr per line was a syscall per request, taken under the
// handler's lock. Lines are kept whole (slog handlers write one line per Write call), none
// is dropped: a line that does not fit flushes what is buffered first, Run flushes every
// interval and once more when its context ends, and Flush can be called any time.
type LineBuffer struct {
	mu sync.Mutex
	w  *bufio.Writer
}

// NewLineBuffer returns a LineBuffer of size bytes over w.
func NewLineBuffer(w io.Writer, size int) *LineBuffer {
	return &LineBuffer{w: bufio.NewWriterSize(w, size)}
}

// Write buffers p, writing out what was buffered first when p does not fit.
func (b *LineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w.Available() < len(p) && b.w.Buffered() > 0 {
		if err := b.w.Flush(); err != nil {
			return 0, err
		}
	}
	return b.w.Write(p)
}

// Flush writes out every buffered line.
func (b *LineBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Flush()
}

// Run flushes every interval until ctx ends, then flushes a last time.
func (b *LineBuffer) Run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = b.Flush()
			return
		case <-tick.C:
			_ = b.Flush()
		}
	}
}

// NewAccessLogger returns the logger for access-log lines: text lines like the other
// logs of `tranche ingress`, tagged component=ingress, at level Info, written through a
// LineBuffer over w that flushes every 100 ms until ctx ends; flushed is closed when the
// last line has been written out (after ctx ends).
func NewAccessLogger(ctx context.Context, w io.Writer) (log *slog.Logger, flushed <-chan struct{}) {
	lb := NewLineBuffer(w, 64<<10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lb.Run(ctx, 100*time.Millisecond)
	}()
	return slog.New(slog.NewTextHandler(lb, nil)).With("component", "ingress"), done
}
