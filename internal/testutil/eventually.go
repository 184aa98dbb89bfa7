// Package testutil holds what tests across the repository share: polling
// for a condition with a deadline, and fixtures that several packages must
// agree on. It is imported only by tests.
package testutil

import (
	"testing"
	"time"
)

// Eventually polls cond until it returns true and fails tb, naming what it
// waited for, when timeout passes first.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	EventuallyState(tb, timeout, what, func() (bool, string) { return cond(), "" })
}

// EventuallyState polls cond until it returns true and fails tb when
// timeout passes first, with what it waited for and the state cond
// described on its last poll. cond runs at least once, even with a zero
// timeout.
func EventuallyState(tb testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	EventuallyEvery(tb, timeout, defaultInterval(timeout), what, cond)
}

// EventuallyEvery is EventuallyState polling every interval, for conditions
// that cost a process or a request to check (end-to-end tests run kubectl).
func EventuallyEvery(tb testing.TB, timeout, interval time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	ok, last := poll(timeout, interval, cond)
	switch {
	case ok:
	case last == "":
		tb.Fatalf("timed out after %s waiting for %s", timeout, what)
	default:
		tb.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, last)
	}
}

// defaultInterval is a thousandth of timeout, from 2ms to 100ms: short
// waits in unit tests stay short, long ones do not spin.
func defaultInterval(timeout time.Duration) time.Duration {
	return min(max(timeout/1000, 2*time.Millisecond), 100*time.Millisecond)
}

// poll runs cond until it holds or timeout passes, sleeping interval in
// between, and returns cond's last answer.
func poll(timeout, interval time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok || !time.Now().Before(deadline) {
			return ok, state
		}
		time.Sleep(min(interval, time.Until(deadline)))
	}
}
