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

// DefaultMaxRetries is the retry budget most upstream controllers give a key: with the
// default controller rate limiter (5ms doubling per failure) the last retry comes about
// 80 seconds after the first failure; the key is synced again on its next event.
const DefaultMaxRetries = 15

// Loop is a TypedLoop over namespace/name (or other string) keys, the common case.
type Loop = TypedLoop[string]

// TypedLoop describes one controller's queue and sync.
type TypedLoop[T comparable] struct {
	// Kind names the synced objects in logs ("DaemonSet").
	Kind  string
	Queue workqueue.TypedRateLimitingInterface[T]
	// Synced are the caches to wait for before the first sync.
	Synced []cache.InformerSynced
	// Start, when not nil, runs once the caches are in and before any sync: it queues
	// what a restart may have missed or loads state the syncs rely on. An error stops the
	// loop before it syncs anything.
	Start func(ctx context.Context) error
	// Sync converges one key; an error requeues it with backoff.
	Sync func(ctx context.Context, key T) error
	// MaxRetries is how many failed syncs in a row a key gets before it is dropped
	// (until its next event); math.MaxInt retries for good, with backoff.
	MaxRetries int
	// Expected, when not nil, picks the errors that are a normal part of operation (an
	// informer cache that has not yet seen the controller's own writes, content still
	// going away): they are retried like any other but logged at debug level only.
	Expected func(error) bool
	Logger   *slog.Logger
}

// Run starts workers goroutines and blocks until ctx ends; it shuts the queue down and
// returns once the syncs under way have returned.
func (l TypedLoop[T]) Run(ctx context.Context, workers int) {
	defer l.Queue.ShutDown()
	l.Logger.Info("starting controller", "workers", workers)
	defer l.Logger.Info("stopping controller")
	if !cache.WaitForCacheSync(ctx.Done(), l.Synced...) {
		return
	}
	if l.Start != nil {
		if err := l.Start(ctx); err != nil {
			l.Logger.Error("starting "+l.Kind+" workers", "err", err)
			return
		}
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

func (l TypedLoop[T]) next(ctx context.Context) bool {
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
		level := slog.LevelInfo
		if l.Expected != nil && l.Expected(err) {
			level = slog.LevelDebug
		}
		l.Logger.Log(ctx, level, "error syncing "+l.Kind+", retrying", "key", key, "err", err)
		l.Queue.AddRateLimited(key)
	default:
		l.Logger.Error("retry budget exceeded, dropping "+l.Kind, "key", key, "err", err)
		l.Queue.Forget(key)
	}
	return true
}
