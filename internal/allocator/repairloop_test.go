package allocator_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/record"

	"github.com/tranche/tranche/internal/allocator"
	"github.com/tranche/tranche/internal/storage"
)

// TestRepairLoop: while the loop runs, an IPAddress deleted through the API while its
// Service holds the address comes back within seconds, long before the loop's
// periodic run, with kube-apiserver's warning event on the Service; an IPAddress
// deleted with its Service stays gone; an allocation lost from the store (no object:
// no event tells of it) comes back at the next periodic run.
func TestRepairLoop(t *testing.T) {
	f := newFixture(t, "10.96.0.0/12")
	svcs := f.client.CoreV1().Services("default")
	ips := f.client.NetworkingV1().IPAddresses()
	web, err := svcs.Create(f.ctx, makeService("web", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := svcs.Create(f.ctx, makeService("gone", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := func(interval time.Duration) (*record.FakeRecorder, func()) {
		t.Helper()
		factory := informers.NewSharedInformerFactory(f.client, 0)
		rec := record.NewFakeRecorder(10)
		loop, err := allocator.NewRepairLoop(allocator.RepairLoopConfig{Alloc: f.alloc, Services: factory.Core().V1().Services(),
			IPAddresses: factory.Networking().V1().IPAddresses(), Interval: interval, Recorder: rec, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(f.ctx)
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
		if !loop.HasSynced() {
			t.Fatal("the loop's informers did not sync")
		}
		done := make(chan struct{})
		go func() { loop.Run(ctx); close(done) }()
		return rec, func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("the loop's Run did not return after its context ended")
			}
			factory.Shutdown()
		}
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10 s", what)
			}
		}
	}

	rec, stop := start(time.Hour)
	if err := ips.Delete(f.ctx, web.Spec.ClusterIP, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the IPAddress of web's ClusterIP back", func() bool {
		ip, err := ips.Get(f.ctx, web.Spec.ClusterIP, metav1.GetOptions{})
		return err == nil && ip.Spec.ParentRef != nil && ip.Spec.ParentRef.Name == "web"
	})
	select {
	case e := <-rec.Events:
		if want := "Warning ClusterIPNotAllocated Cluster IP [IPv4]: " + web.Spec.ClusterIP + " is not allocated; repairing"; e != want {
			t.Errorf("event %q, want %q", e, want)
		}
	case <-time.After(5 * time.Second):
		t.Error("no event on web")
	}
	if err := svcs.Delete(f.ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // a second past the loop's delay after an event
	if _, err := ips.Get(f.ctx, gone.Spec.ClusterIP, metav1.GetOptions{}); err == nil {
		t.Errorf("the IPAddress of deleted Service gone (%s) came back", gone.Spec.ClusterIP)
	}
	stop()

	if _, err := f.store.Delete(f.ctx, allocator.IPPrefix+web.Spec.ClusterIP, 0); err != nil {
		t.Fatal(err)
	}
	_, stop = start(500 * time.Millisecond)
	defer stop()
	// The loop's first run at start may already have recorded it; deleting it again
	// leaves the periodic runs to.
	time.Sleep(time.Second)
	if _, err := f.store.Delete(f.ctx, allocator.IPPrefix+web.Spec.ClusterIP, 0); err != nil {
		t.Fatalf("web's allocation was not recorded again by the loop's first run: %v", err)
	}
	waitFor("web's allocation recorded again", func() bool { return slices.Contains(f.keys(t), web.Spec.ClusterIP) })
}

// failingLists is a store whose first n Lists fail as a store without quorum does.
type failingLists struct {
	storage.Interface
	n atomic.Int32
}

func (s *failingLists) List(ctx context.Context, prefix string, opts storage.ListOptions) (*storage.ListResult, error) {
	if s.n.Add(-1) >= 0 {
		return nil, &storage.UnavailableError{Err: errors.New("etcdserver: request timed out")}
	}
	return s.Interface.List(ctx, prefix, opts)
}

// TestRepairLoopRetries: a run that fails (the store answers no List) is retried with
// a growing pause, not left to the next period.
func TestRepairLoopRetries(t *testing.T) {
	f := newFixture(t, "10.96.0.0/12")
	web, err := f.client.CoreV1().Services("default").Create(f.ctx, makeService("web", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Delete(f.ctx, allocator.IPPrefix+web.Spec.ClusterIP, 0); err != nil {
		t.Fatal(err)
	}
	store := &failingLists{Interface: f.store}
	store.n.Store(2)
	alloc := *f.alloc
	alloc.Store = store
	factory := informers.NewSharedInformerFactory(f.client, 0)
	loop, err := allocator.NewRepairLoop(allocator.RepairLoopConfig{Alloc: &alloc, Services: factory.Core().V1().Services(),
		IPAddresses: factory.Networking().V1().IPAddresses(), Interval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { loop.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; factory.Shutdown() }()
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(f.keys(t), web.Spec.ClusterIP); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("web's allocation not recorded 10 s after two failed runs (%d Lists left to fail)", store.n.Load())
		}
	}
}
