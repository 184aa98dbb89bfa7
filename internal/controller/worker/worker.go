// Package worker is the loop every controller runs: wait for the informer caches, then
// take keys from a rate-limited queue and sync them, retrying failures with backoff up to
// a budget, until the context ends.
package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Loop describes one controller's queue and sync.
type Loop struct {
	// Kind names the synced objects in logs ("DaemonSet").
	Kind  string
	Queue workqueue.TypedRateLimitingInterface[string]
	// Synced are the caches to wait for before the first sync.
	Synced []cache.InformerSynced
	// Sync converges one key; an error requeues it with backoff.
	Sync func(ctx context.Context, key string) error
	// MaxRetries is how many failed syncs in a row a key gets before it is dropped
	// (until its next event); math.MaxInt retries for good, with backoff.
	MaxRetries int
	Logger     *slog.Logger
}

// Run starts workers goroutines and blocks until ctx ends; it shuts the queue down and
// returns once the syncs under way have returned.
func (l Loop) Run(ctx context.Context, workers int) {
	defer l.Queue.ShutDown()
	l.Logger.Info("starting controller", "workers", workers)
	defer l.Logger.Info("stopping controller")
	if !cache.WaitForCacheSync(ctx.Done(), l.Synced...) {
		return
	}
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for l.next(ctx) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
	l.Queue.ShutDown()
	wg.Wait()
}

func (l Loop) next(ctx context.Context) bool {
	key, quit := l.Queue.Get()
	if quit {
		return false
	}
	defer l.Queue.Done(key)
	err := l.Sync(ctx, key)
	switch {
	case err == nil:
		l.Queue.Forget(key)
	case l.Queue.NumRequeues(key) < l.MaxRetries:
		l.Logger.Info("error syncing "+l.Kind+", retrying", "key", key, "err", err)
		l.Queue.AddRateLimited(key)
	default:
		l.Logger.Error("retry budget exceeded, dropping "+l.Kind, "key", key, "err", err)
		l.Queue.Forget(key)
	}
	return true
}
