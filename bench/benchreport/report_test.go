package benchreport

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestPrint(t *testing.T) {
	rp := New()
	rp.Set(Row{Metric: "sync", Ours: "10 ms", Reference: "nft -f 8 ms", Ratio: 1.25, Goal: "<= 1.5"})
	rp.Set(Row{Metric: "none", Ours: "1", Reference: "0", Ratio: Ratio(1, 0)})
	rp.Set(Row{Metric: "sync", Ours: "9 ms", Reference: "nft -f 8 ms", Ratio: 1.125, Goal: "<= 1.5"})
	rp.Note("load %d", 3)
	var b strings.Builder
	rp.Print(&b)
	want := `
metric   ours   reference     ratio   goal
sync     9 ms   nft -f 8 ms   1.12    <= 1.5
none     1      0             -       
  load 3

`
	if b.String() != want {
		t.Errorf("got:\n%q\nwant:\n%q", b.String(), want)
	}
}

func TestHelpers(t *testing.T) {
	if !math.IsNaN(Ratio(1, 0)) || Ratio(3, 2) != 1.5 {
		t.Error("Ratio")
	}
	ds := []time.Duration{5, 1, 4, 2, 3}
	if Percentile(ds, 50) != 3 || Percentile(ds, 99) != 5 || Percentile(nil, 50) != 0 {
		t.Error("Percentile")
	}
	for d, want := range map[time.Duration]string{1500 * time.Microsecond: "1.50 ms", 42 * time.Millisecond: "42 ms", 2500 * time.Millisecond: "2.50 s"} {
		if got := Ms(d); got != want {
			t.Errorf("Ms(%v) = %q, want %q", d, got, want)
		}
	}
}
