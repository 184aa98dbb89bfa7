package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/testutil"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

func TestLoopRetriesThenDrops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Millisecond))
	var mu sync.Mutex
	calls := map[string]int{}
	sync := func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		if key == "flaky" && calls[key] < 3 || key == "broken" {
			return errors.New("not yet")
		}
		return nil
	}
	l := Loop{Kind: "Thing", Queue: q, Sync: sync, MaxRetries: 4, Logger: slog.New(slog.DiscardHandler)}
	go l.Run(ctx, 2)
	q.Add("flaky")
	q.Add("broken")
	q.Add("fine")
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		done := calls["flaky"] == 3 && calls["broken"] == 5 && calls["fine"] == 1
		got := map[string]int{"flaky": calls["flaky"], "broken": calls["broken"], "fine": calls["fine"]}
		mu.Unlock()
		if done && q.Len() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls %v: want flaky 3 (two failures, then success), broken 5 (the first try and 4 retries), fine 1", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if calls["broken"] != 5 || calls["flaky"] != 3 {
		t.Fatalf("a key was synced again after success or after its budget: %v", calls)
	}
}

// TestRunWaitsForSyncsUnderWay: Run returns only once a sync that was running when the
// context ended has returned, so nothing writes after the controller stopped.
func TestRunWaitsForSyncsUnderWay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	started, release := make(chan struct{}), make(chan struct{})
	sync := func(context.Context, string) error {
		close(started)
		<-release
		return nil
	}
	returned := make(chan struct{})
	go func() {
		Loop{Kind: "Thing", Queue: q, Sync: sync, MaxRetries: 1, Logger: slog.New(slog.DiscardHandler)}.Run(ctx, 1)
		close(returned)
	}()
	q.Add("slow")
	<-started
	cancel()
	select {
	case <-returned:
		t.Fatal("Run returned while a sync was under way")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the sync did")
	}
}

// TestLoopForgetsOnSuccess: a success resets a key's retry budget, so a key that failed
// before gets the whole budget again on its next failures.
func TestLoopForgetsOnSuccess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Millisecond))
	var mu sync.Mutex
	calls := 0
	// Two failures, a success, then failures for good: with a budget of 2 retries the
	// key is synced 3 + 3 times.
	sync := func(context.Context, string) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 3 {
			return nil
		}
		return errors.New("fails")
	}
	go Loop{Kind: "Thing", Queue: q, Sync: sync, MaxRetries: 2, Logger: slog.New(slog.DiscardHandler)}.Run(ctx, 1)
	q.Add("k")
	testutil.Eventually(t, 5*time.Second, "the condition", func() bool { mu.Lock(); defer mu.Unlock(); return calls == 3 && q.NumRequeues("k") == 0 })
	q.Add("k")
	testutil.Eventually(t, 5*time.Second, "the condition", func() bool { mu.Lock(); defer mu.Unlock(); return calls == 6 && q.Len() == 0 })
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if calls != 6 {
		t.Fatalf("synced %d times, want 6: the success must reset the budget of 2 retries", calls)
	}
}

// TestLoopExpectedErrorsAreQuiet: an error the controller expects (a stale cache) is
// retried like any other but logged at debug level, other errors at info, and the drop
// at error level.
func TestLoopExpectedErrorsAreQuiet(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stale := errors.New("informer cache is out of date")
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Millisecond))
	rec := &recordingHandler{}
	var mu sync.Mutex
	calls := map[string]int{}
	sync := func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		if key == "stale" {
			return stale
		}
		return errors.New("boom")
	}
	go Loop{Kind: "Thing", Queue: q, Sync: sync, MaxRetries: 1, Expected: func(err error) bool { return errors.Is(err, stale) },
		Logger: slog.New(rec)}.Run(ctx, 1)
	q.Add("stale")
	q.Add("broken")
	testutil.Eventually(t, 5*time.Second, "the condition", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls["stale"] == 2 && calls["broken"] == 2 && q.Len() == 0
	})
	testutil.Eventually(t, 5*time.Second, "the condition", func() bool { return rec.count(slog.LevelError, "") == 2 })
	if n := rec.count(slog.LevelInfo, "informer cache is out of date"); n != 0 {
		t.Errorf("a stale cache was logged %d times at info level", n)
	}
	if n := rec.count(slog.LevelDebug, "informer cache is out of date"); n != 1 {
		t.Errorf("stale retries at debug level: %d, want 1", n)
	}
	if n := rec.count(slog.LevelInfo, "boom"); n != 1 {
		t.Errorf("failed retries at info level: %d, want 1", n)
	}
}

// TestLoopStartRunsBeforeSyncs: Start runs once the caches are in and before any sync;
// its error stops the loop without syncing.
func TestLoopStartRunsBeforeSyncs(t *testing.T) {
	for _, fail := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
		var mu sync.Mutex
		var order []string
		synced := false
		l := Loop{Kind: "Thing", Queue: q, MaxRetries: 1, Logger: slog.New(slog.DiscardHandler),
			Synced: []cache.InformerSynced{func() bool { mu.Lock(); defer mu.Unlock(); return synced }},
			Start: func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, "start")
				q.Add("from-start")
				if fail {
					return errors.New("no state")
				}
				return nil
			},
			Sync: func(_ context.Context, key string) error {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, key)
				return nil
			}}
		done := make(chan struct{})
		go func() { l.Run(ctx, 1); close(done) }()
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		if len(order) != 0 {
			t.Errorf("ran %v before the caches synced", order)
		}
		synced = true
		mu.Unlock()
		if fail {
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("a failing Start did not stop the loop")
			}
		} else {
			testutil.Eventually(t, 5*time.Second, "the condition", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 2 })
		}
		cancel()
		<-done
		want := "[start from-start]"
		if fail {
			want = "[start]"
		}
		if got := fmt.Sprint(order); got != want {
			t.Errorf("fail=%v: order %s, want %s", fail, got, want)
		}
	}
}

// recordingHandler is a slog.Handler keeping every record's level and text.
type recordingHandler struct {
	mu      sync.Mutex
	records []string
	levels  []slog.Level
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	text := r.Message
	r.Attrs(func(a slog.Attr) bool {
		text += " " + a.Key + "=" + a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, text)
	h.levels = append(h.levels, r.Level)
	return nil
}

func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// count is how many records at level contain text.
func (h *recordingHandler) count(level slog.Level, text string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for i, r := range h.records {
		if h.levels[i] == level && strings.Contains(r, text) {
			n++
		}
	}
	return n
}

// TestNewQueueMetrics: a controller's queue reports to the process's workqueue metrics
// provider under the controller's name (the API server serves them on /metrics).
func TestNewQueueMetrics(t *testing.T) {
	p := &countingProvider{adds: map[string]*counter{}}
	workqueue.SetProvider(p)
	q := NewQueue("thing", nil)
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.adds["thing"]; c == nil || c.n != 2 {
		t.Fatalf("adds of queue thing = %v, want 2 (another test's SetProvider ran first?)", c)
	}
}

var _ workqueue.MetricsProvider = (*countingProvider)(nil)

type counter struct{ n int }

func (c *counter) Inc() { c.n++ }

type countingProvider struct {
	mu   sync.Mutex
	adds map[string]*counter
}

func (p *countingProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &counter{}
	p.adds[name] = c
	return lockedCounter{&p.mu, c}
}

type lockedCounter struct {
	mu *sync.Mutex
	c  *counter
}

func (l lockedCounter) Inc() { l.mu.Lock(); defer l.mu.Unlock(); l.c.Inc() }

type noop struct{}

func (noop) Inc()            {}
func (noop) Dec()            {}
func (noop) Set(float64)     {}
func (noop) Observe(float64) {}

func (p *countingProvider) NewDepthMetric(string) workqueue.GaugeMetric            { return noop{} }
func (p *countingProvider) NewLatencyMetric(string) workqueue.HistogramMetric      { return noop{} }
func (p *countingProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noop{} }
func (p *countingProvider) NewRetriesMetric(string) workqueue.CounterMetric        { return noop{} }
func (p *countingProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
func (p *countingProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
