package cronjob

import (
	"context"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/testutil"
)

// TestRunRequeuesOnTheClock drives the controller through its informers and
// queue: the requeue for the next start time fires when the fake clock
// reaches it, and the Job is created.
func TestRunRequeuesOnTheClock(t *testing.T) {
	f := newFixture(t, makeCronJob(nil))
	ctx, cancel := context.WithCancel(context.Background())
	f.factory.Start(ctx.Done())
	go f.c.Run(ctx, 1)
	defer func() {
		cancel()
		f.factory.Shutdown()
	}()
	// The first sync schedules a wake-up in 5 minutes on the fake clock.
	testutil.Eventually(t, 5*time.Second, "the condition", func() bool { return f.clock.HasWaiters() })
	if got := f.jobNames(t); len(got) != 0 {
		t.Fatalf("jobs before the schedule: %v", got)
	}
	f.clock.Step(5*time.Minute + time.Second)
	want := name(t0.Add(5 * time.Minute))
	testutil.Eventually(t, 5*time.Second, "the condition", func() bool {
		got := f.jobNames(t)
		return len(got) == 1 && got[0] == want
	})
}
