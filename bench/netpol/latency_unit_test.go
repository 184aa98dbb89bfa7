package netpol

import (
	"testing"
	"time"
)

// TestHoldsSince: the latency benchmark's reading of its probes. A change holds from the
// first attempt of the last run of attempts showing the new state, once that run is
// confirm long and old enough that every earlier attempt has ended; a stray attempt of
// the old state (an accepted connection that timed out on a busy machine) moves the
// figure later, never earlier.
func TestHoldsSince(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	later := ms(1000)
	cases := []struct {
		name   string
		seen   []attempt // any order: attempts end out of order
		now    time.Time
		want   bool
		at     time.Time
		holds  bool
		before int // attempts kept afterwards
	}{
		{name: "nothing seen", now: later, want: false},
		{name: "drops from the third attempt on",
			seen: []attempt{{ms(1), true}, {ms(2), true}, {ms(5), false}, {ms(3), false}, {ms(4), false}},
			now:  later, want: false, at: ms(3), holds: true},
		{name: "a stray old-state answer restarts the run",
			seen: []attempt{{ms(1), false}, {ms(2), true}, {ms(3), false}, {ms(4), false}, {ms(6), false}},
			now:  later, want: false, at: ms(3), holds: true},
		{name: "two in a row are not enough",
			seen: []attempt{{ms(1), false}, {ms(2), true}, {ms(3), true}},
			now:  later, want: true},
		{name: "a run too recent: earlier attempts may still be waiting for their timeout",
			seen: []attempt{{ms(10), true}, {ms(11), true}, {ms(12), true}},
			now:  ms(20), want: true},
		{name: "attempts from before the change are forgotten",
			seen: []attempt{{t0.Add(-time.Millisecond), true}, {ms(1), false}, {ms(2), false}, {ms(3), false}},
			now:  later, want: false, at: ms(1), holds: true, before: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &prober{seen: tc.seen}
			at, holds := p.holdsSince(t0, tc.now, tc.want)
			if holds != tc.holds || !at.Equal(tc.at) {
				t.Errorf("holdsSince = %v, %v; want %v, %v", at.Sub(t0), holds, tc.at.Sub(t0), tc.holds)
			}
			if tc.before > 0 && len(p.seen) != tc.before {
				t.Errorf("%d attempts kept, want %d", len(p.seen), tc.before)
			}
		})
	}
}
