package benchreport

import (
	"context"
	"sync"
	"sync/atomic"
)

// Parallel runs op(i) for i in [0, n) spread over one goroutine per client and returns
// how many succeeded, stopping at the first error (which it returns).
func Parallel[C any](ctx context.Context, clients []C, n int, op func(ctx context.Context, client C, i int) error) (int, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := op(ctx, c, i); err != nil {
					cancel(err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return int(done.Load()), context.Cause(ctx)
}
