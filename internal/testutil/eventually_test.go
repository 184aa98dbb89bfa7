package testutil

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of stopping the
// test, so Eventually's own failure can be asserted.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestEventuallyReturnsOnceTrue(t *testing.T) {
	calls := 0
	r := &recorder{TB: t}
	Eventually(r, time.Minute, "the third call", func() bool { calls++; return calls == 3 })
	if r.failed != "" || calls != 3 {
		t.Errorf("after %d calls failed with %q; want success on the third", calls, r.failed)
	}
}

func TestEventuallyFailureNamesWhatAndState(t *testing.T) {
	r := &recorder{TB: t}
	n := 0
	EventuallyState(r, 20*time.Millisecond, "pods to be ready", func() (bool, string) {
		n++
		return false, fmt.Sprintf("%d ready", n)
	})
	want := fmt.Sprintf("timed out after 20ms waiting for pods to be ready; last state: %d ready", n)
	if r.failed != want {
		t.Errorf("failure = %q, want %q", r.failed, want)
	}
	r.failed = ""
	Eventually(r, 0, "nothing", func() bool { return false })
	if !strings.HasPrefix(r.failed, "timed out after 0s waiting for nothing") || strings.Contains(r.failed, "last state") {
		t.Errorf("failure without state = %q", r.failed)
	}
}

func TestEventuallyEveryPollsAtInterval(t *testing.T) {
	calls := 0
	r := &recorder{TB: t}
	EventuallyEvery(r, 50*time.Millisecond, time.Hour, "a slow condition", func() (bool, string) { calls++; return false, "" })
	if calls != 2 || r.failed == "" {
		t.Errorf("polled %d times and failed with %q; want two: the sleep ends at the deadline, not after the interval", calls, r.failed)
	}
}
