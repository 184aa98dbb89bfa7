package manager

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

// fakeController records how it was run; its Run keeps a worker busy until release is
// closed, even after ctx ended, like a sync under way.
type fakeController struct {
	synced   atomic.Bool
	ran      chan struct{}
	release  chan struct{}
	returned atomic.Bool
	early    atomic.Bool
}

func newFake() *fakeController {
	return &fakeController{ran: make(chan struct{}), release: make(chan struct{})}
}

func (f *fakeController) HasSynced() bool { return f.synced.Load() }

func (f *fakeController) Run(ctx context.Context) {
	if !f.synced.Load() {
		f.early.Store(true)
	}
	close(f.ran)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		<-f.release
	}()
	<-done
	f.returned.Store(true)
}

func descriptor(name string, c Controller) Descriptor {
	return Descriptor{Name: name, New: func(context.Context, Context) (Controller, error) { return c, nil }}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

// TestRunWaitsForCachesThenForWorkers: a controller runs only once its caches are in,
// and Run returns only after every controller's workers returned.
func TestRunWaitsForCachesThenForWorkers(t *testing.T) {
	a, b := newFake(), newFake()
	a.synced.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	m := &Manager{Client: fake.NewClientset(), Descriptors: []Descriptor{descriptor("a", a), descriptor("b", b)},
		Started: func() { close(started) }}
	returned := make(chan error, 1)
	go func() { returned <- m.Run(ctx) }()
	waitClosed(t, started, "start")
	waitClosed(t, a.ran, "a's Run")
	select {
	case <-b.ran:
		t.Fatal("b ran before its caches synced")
	case <-time.After(200 * time.Millisecond):
	}
	b.synced.Store(true)
	waitClosed(t, b.ran, "b's Run once synced")
	if a.early.Load() || b.early.Load() {
		t.Fatal("a controller ran before HasSynced")
	}
	cancel()
	close(a.release)
	select {
	case <-returned:
		t.Fatal("Run returned while b's worker was still busy")
	case <-time.After(200 * time.Millisecond):
	}
	close(b.release)
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the workers did")
	}
	if !a.returned.Load() || !b.returned.Load() {
		t.Fatal("Run returned before every controller's Run")
	}
}

// TestRunConstructorFails: a failing constructor stops Run with an error naming the
// controller, and nothing is run.
func TestRunConstructorFails(t *testing.T) {
	ok := newFake()
	ok.synced.Store(true)
	var disabledBuilt atomic.Bool
	m := &Manager{Client: fake.NewClientset(), Descriptors: []Descriptor{
		descriptor("fine", ok),
		{Name: "off", Disabled: true, New: func(context.Context, Context) (Controller, error) {
			disabledBuilt.Store(true)
			return newFake(), nil
		}},
		{Name: "broken", New: func(context.Context, Context) (Controller, error) { return nil, errors.New("no storage class") }},
	}}
	done := make(chan error, 1)
	go func() { done <- m.Run(context.Background()) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return on a constructor error")
	}
	if err == nil || !strings.Contains(err.Error(), "broken") || !strings.Contains(err.Error(), "no storage class") {
		t.Fatalf("Run error = %v, want one naming controller broken and its cause", err)
	}
	select {
	case <-ok.ran:
		t.Fatal("a controller ran although another's constructor failed")
	default:
	}
	if disabledBuilt.Load() {
		t.Fatal("a disabled controller was constructed")
	}
}

// TestRunAgain: the manager is one unit that can be stopped and started again (what
// leader election does), each Run with fresh informers and controllers.
func TestRunAgain(t *testing.T) {
	client := fake.NewClientset()
	var built atomic.Int32
	m := &Manager{Client: client, Descriptors: []Descriptor{{Name: "pods", New: func(_ context.Context, c Context) (Controller, error) {
		built.Add(1)
		f := newFake()
		inf := c.Informers.Core().V1().Pods().Informer()
		close(f.release)
		return &informerController{fakeController: f, synced: inf.HasSynced}, nil
	}}}}
	for i := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{})
		m.Started = func() { close(started) }
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		waitClosed(t, started, "start")
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d did not stop", i)
		}
	}
	if built.Load() != 2 {
		t.Fatalf("constructed %d times, want once per Run", built.Load())
	}
}

type informerController struct {
	*fakeController
	synced func() bool
}

func (c *informerController) HasSynced() bool { return c.synced() }

// TestStopBeforeCachesSynced: a controller whose caches never filled is still run once
// the manager stops, with its context ended, so that it shuts its queue down instead of
// leaking it; Run returns.
func TestStopBeforeCachesSynced(t *testing.T) {
	never := newFake()
	close(never.release)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	m := &Manager{Client: fake.NewClientset(), Descriptors: []Descriptor{descriptor("never", never)}, Started: func() { close(started) }}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	waitClosed(t, started, "start")
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	select {
	case <-never.ran:
	default:
		t.Fatal("the unsynced controller was never run to release its queue")
	}
	if !never.returned.Load() {
		t.Fatal("Run returned before the controller's Run")
	}
}
