package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tranche/tranche/internal/controller/manager"
	"github.com/tranche/tranche/internal/leader"
)

// TestReregistering: a controller of a second term registers a collector named as the
// first term's; it replaces it instead of panicking, and counts from zero.
func TestReregistering(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := reregistering{reg}
	term := func() prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "syncs_total", Help: "syncs"})
		r.MustRegister(c)
		return c
	}
	first := term()
	first.Add(3)
	second := term()
	second.Inc()
	if n, err := testutil.GatherAndCount(reg, "syncs_total"); err != nil || n != 1 {
		t.Fatalf("syncs_total series = %d (%v), want 1", n, err)
	}
	if got := testutil.ToFloat64(second); got != 1 {
		t.Fatalf("second term's counter = %v, want 1", got)
	}
	if err := r.Register(prometheus.NewGauge(prometheus.GaugeOpts{Name: "syncs_total", Help: "other type"})); err == nil {
		t.Fatal("a collector inconsistent with the registered one was accepted")
	}
}

// TestRunElectedRetriesAndStops: with the lease held, a manager whose constructor failed
// is started again; cancelling stops it and stopped yields once its controllers returned.
func TestRunElectedRetriesAndStops(t *testing.T) {
	client := fake.NewClientset()
	var attempts atomic.Int32
	running := make(chan struct{})
	var returned atomic.Bool
	desc := manager.Descriptor{Name: "flaky", New: func(context.Context, manager.Context) (manager.Controller, error) {
		if attempts.Add(1) == 1 {
			return nil, errors.New("storage class not there yet")
		}
		return runFunc(func(ctx context.Context) {
			close(running)
			<-ctx.Done()
			returned.Store(true)
		}), nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	units := []electedUnit{{lease: leader.ControllerManagerLease, component: "kube-controller-manager",
		m: &manager.Manager{Client: client, Descriptors: []manager.Descriptor{desc}}}}
	timing := leader.Timing{LeaseDuration: time.Second, RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
	stopped, err := runElected(ctx, client, units, LeaderElection{Enabled: true, Timing: timing}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-running:
	case <-time.After(10 * time.Second):
		t.Fatal("the controller never ran after its constructor's first failure")
	}
	l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, leader.ControllerManagerLease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || !strings.Contains(*l.Spec.HolderIdentity, "_") {
		t.Fatalf("lease kube-system/kube-controller-manager: %v %v", l, err)
	}
	cancel()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stopped did not yield after the cancel")
	}
	if !returned.Load() {
		t.Fatal("stopped yielded before the controller returned")
	}
}

type runFunc func(ctx context.Context)

func (f runFunc) Run(ctx context.Context) { f(ctx) }
