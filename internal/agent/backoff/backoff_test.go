package backoff

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// event is one call of Check at t0+at for a container that exited at t0+exited.
type event struct {
	at, exited time.Duration
	wantWait   time.Duration
	wantWindow time.Duration
}

func TestCheck(t *testing.T) {
	s := time.Second
	tests := []struct {
		name   string
		events []event
	}{{
		name: "first restart is immediate, then 10s doubling",
		events: []event{
			{at: 0, exited: 0, wantWait: 0, wantWindow: 10 * s},
			{at: 1 * s, exited: 1 * s, wantWait: 10 * s, wantWindow: 10 * s},
			{at: 5 * s, exited: 1 * s, wantWait: 6 * s, wantWindow: 10 * s},
			{at: 11 * s, exited: 1 * s, wantWait: 0, wantWindow: 20 * s},
			{at: 12 * s, exited: 12 * s, wantWait: 20 * s, wantWindow: 20 * s},
			{at: 32 * s, exited: 12 * s, wantWait: 0, wantWindow: 40 * s},
		},
	}, {
		name: "capped at five minutes",
		events: func() []event {
			// Each exit comes 1s after the restart and is restarted when its wait ends.
			var ev []event
			exited, wait := time.Duration(0), time.Duration(0)
			for _, w := range []time.Duration{10, 20, 40, 80, 160, 300, 300} {
				ev = append(ev, event{at: exited + wait, exited: exited, wantWait: 0, wantWindow: w * s})
				exited, wait = exited+wait+s, w*s
			}
			return ev
		}(),
	}, {
		name: "ten minutes of running start over",
		events: []event{
			{at: 0, exited: 0, wantWait: 0, wantWindow: 10 * s},
			{at: 10 * s, exited: 0, wantWait: 0, wantWindow: 20 * s},
			{at: 10*s + 10*time.Minute + s, exited: 10*s + 10*time.Minute + s, wantWait: 0, wantWindow: 10 * s},
			{at: 10*s + 10*time.Minute + 2*s, exited: 10*s + 10*time.Minute + 2*s, wantWait: 10 * s, wantWindow: 10 * s},
		},
	}, {
		name: "nine minutes of running do not",
		events: []event{
			{at: 0, exited: 0, wantWait: 0, wantWindow: 10 * s},
			{at: 9 * time.Minute, exited: 9 * time.Minute, wantWait: 10 * s, wantWindow: 10 * s},
			{at: 9*time.Minute + 10*s, exited: 9 * time.Minute, wantWait: 0, wantWindow: 20 * s},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(t0)
			b := New(clk)
			for i, e := range tt.events {
				clk.SetTime(t0.Add(e.at))
				wait, window := b.Check("k", t0.Add(e.exited))
				if wait != e.wantWait || window != e.wantWindow {
					t.Errorf("event %d: Check = %v, %v; want %v, %v", i, wait, window, e.wantWait, e.wantWindow)
				}
			}
		})
	}
}

func TestPerContainerAndGC(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	b := New(clk)
	b.Check("a", t0)
	b.Check("a", t0.Add(-time.Minute))
	if b.Window("a") != 20*time.Second || b.Window("b") != 0 {
		t.Fatalf("windows a=%v b=%v", b.Window("a"), b.Window("b"))
	}
	if wait, _ := b.Check("b", t0); wait != 0 {
		t.Errorf("b waits %v on its first exit", wait)
	}
	b.Forget("b")
	if b.Window("b") != 0 {
		t.Error("Forget kept b")
	}
	clk.SetTime(t0.Add(9 * time.Minute))
	b.GC()
	if b.Window("a") == 0 {
		t.Error("GC dropped a recent entry")
	}
	clk.SetTime(t0.Add(11 * time.Minute))
	b.GC()
	if b.Window("a") != 0 {
		t.Error("GC kept an old entry")
	}
}

func TestKeyAndMessages(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}}
	c := &v1.Container{Name: "app", Image: "busybox:1.36"}
	c2 := &v1.Container{Name: "app", Image: "busybox:1.37"}
	if Key(pod, c) == Key(pod, c2) {
		t.Error("a new image must give a new key")
	}
	if Key(pod, c) != Key(pod, c.DeepCopy()) {
		t.Error("key is not stable")
	}
	if got := Key(nil, nil); got == "" {
		t.Error("empty key for nil input")
	}
	if got, want := Message(40*time.Second, "app", pod), "back-off 40s restarting failed container=app pod=web_ns(u1)"; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
	if got, want := Message(5*time.Minute, "app", pod), "back-off 5m0s restarting failed container=app pod=web_ns(u1)"; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
	if got, want := EventMessage("app", pod), "Back-off restarting failed container app in pod web_ns(u1)"; got != want {
		t.Errorf("EventMessage = %q, want %q", got, want)
	}
}
