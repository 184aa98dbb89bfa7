package netprog

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	for _, tc := range []struct {
		name string
		d    []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"p50 of four is the second", ms(40, 10, 30, 20), 50, 20 * time.Millisecond},
		{"p99 of a hundred is the 99th", ms(func() []int {
			var v []int
			for i := 100; i >= 1; i-- {
				v = append(v, i)
			}
			return v
		}()...), 99, 99 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.d, tc.p); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.d, tc.p, got, tc.want)
			}
		})
	}
}

func TestReadyFrom(t *testing.T) {
	c := Changes{ReadyAt: [][]time.Duration{{1, 2, 3}, {4, 5, 6}}}
	if diff := cmp.Diff([]time.Duration{2, 3, 5, 6}, c.ReadyFrom(1, 3)); diff != "" {
		t.Errorf("ReadyFrom(1, 3) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{1, 4}, c.ReadyFrom(0, 1)); diff != "" {
		t.Errorf("ReadyFrom(0, 1) (-want +got):\n%s", diff)
	}
}

func TestRow(t *testing.T) {
	var b strings.Builder
	Row(&b, "x", []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond}, 100*time.Millisecond)
	if want := "x\t50.0 ms\t200.0 ms\t200.0 ms\t100.0 ms\t2.00\n"; b.String() != want {
		t.Errorf("Row = %q, want %q", b.String(), want)
	}
}

func TestSlowest(t *testing.T) {
	ms := time.Millisecond
	at := time.Date(2026, 12, 5, 6, 47, 36, 725e6, time.UTC)
	c := Changes{
		ToReady:   []time.Duration{20 * ms, 90 * ms, 40 * ms},
		SliceAt:   []time.Duration{5 * ms, 60 * ms, -1 * ms},
		ReadyAt:   [][]time.Duration{{10 * ms, 20 * ms}, {90 * ms, 70 * ms}, {40 * ms, 30 * ms}},
		WatchedAt: []time.Time{at, at.Add(time.Second), at.Add(2 * time.Second)},
	}
	var b strings.Builder
	Slowest(&b, c, []string{"m1", "m2"}, 2)
	want := "slowest changes to Ready (ms after the pod's watch)\tchange\tpod's watch at\tslice\tm1\tm2\t\n" +
		"  90.0 ms\t2\t06:47:37.725\t60.0\t90.0\t70.0\t\n" +
		"  40.0 ms\t3\t06:47:38.725\t-1.0\t40.0\t30.0\t\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("Slowest (-want +got):\n%s", diff)
	}
}

func TestCountersParse(t *testing.T) {
	// Counters' line format: a series name with its labels, a space, the value.
	series := []string{`endpoint_slice_controller_syncs{result="stale"}`}
	got := parseCounters("# HELP x\n"+`endpoint_slice_controller_syncs{result="stale"} 3`+"\n"+
		`endpoint_slice_controller_syncs{result="success"} 9`+"\n", series)
	if diff := cmp.Diff(map[string]float64{series[0]: 3}, got); diff != "" {
		t.Errorf("parseCounters (-want +got):\n%s", diff)
	}
}
