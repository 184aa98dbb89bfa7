package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
