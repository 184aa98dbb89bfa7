package probe

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// step is one tick of a worker in a test: the container as seen at t0+at, and the
// outcome the probe gives if it is run.
type step struct {
	at      time.Duration
	c       Container
	outcome Result
	// ran is whether the probe must have been run at this step.
	ran bool
	// want is the update expected from this step (nil for none).
	want *Update
	// stop is true when the worker must say to stop here.
	stop bool
}

func running(id string, started bool) Container {
	return Container{ID: id, Running: true, StartedAt: t0, Started: started}
}

func upd(kind Kind, id string, r Result) *Update {
	return &Update{Kind: kind, ContainerID: id, Result: r, Message: msgFor(r)}
}

func msgFor(r Result) string {
	if r == Failure {
		return "HTTP probe failed with statuscode: 503"
	}
	return ""
}

func TestWorkerStep(t *testing.T) {
	tests := []struct {
		name    string
		kind    Kind
		spec    v1.Probe
		restart v1.RestartPolicy
		steps   []step
	}{{
		name: "readiness starts false and turns true on the first success",
		kind: Readiness,
		spec: v1.Probe{PeriodSeconds: 5},
		steps: []step{
			{c: Container{}, want: nil},
			{c: running("c1", true), outcome: Success, ran: true, want: upd(Readiness, "c1", Success)},
			{at: 5 * time.Second, c: running("c1", true), outcome: Success, ran: true},
		},
	}, {
		name: "readiness initial value is published for a new container",
		kind: Readiness,
		steps: []step{
			{c: running("c1", true), outcome: Failure, ran: true, want: &Update{Kind: Readiness, ContainerID: "c1", Result: Failure}},
		},
	}, {
		name: "initial delay",
		kind: Readiness,
		spec: v1.Probe{InitialDelaySeconds: 10},
		steps: []step{
			{at: 0, c: running("c1", true), outcome: Success, want: &Update{Kind: Readiness, ContainerID: "c1", Result: Failure}},
			{at: 9 * time.Second, c: running("c1", true), outcome: Success},
			{at: 10 * time.Second, c: running("c1", true), outcome: Success, ran: true, want: upd(Readiness, "c1", Success)},
		},
	}, {
		name: "readiness failure threshold, then success threshold",
		kind: Readiness,
		spec: v1.Probe{FailureThreshold: 3, SuccessThreshold: 2},
		steps: []step{
			{c: running("c1", true), outcome: Success, ran: true, want: &Update{Kind: Readiness, ContainerID: "c1", Result: Failure}},
			{at: 10 * time.Second, c: running("c1", true), outcome: Success, ran: true, want: upd(Readiness, "c1", Success)},
			{at: 20 * time.Second, c: running("c1", true), outcome: Failure, ran: true},
			{at: 30 * time.Second, c: running("c1", true), outcome: Failure, ran: true},
			{at: 40 * time.Second, c: running("c1", true), outcome: Failure, ran: true, want: upd(Readiness, "c1", Failure)},
			{at: 50 * time.Second, c: running("c1", true), outcome: Success, ran: true},
			{at: 60 * time.Second, c: running("c1", true), outcome: Failure, ran: true},
			{at: 70 * time.Second, c: running("c1", true), outcome: Success, ran: true},
			{at: 80 * time.Second, c: running("c1", true), outcome: Success, ran: true, want: upd(Readiness, "c1", Success)},
		},
	}, {
		name: "errored probes are not counted",
		kind: Readiness,
		spec: v1.Probe{FailureThreshold: 2},
		steps: []step{
			{c: running("c1", true), outcome: Success, ran: true, want: upd(Readiness, "c1", Success)},
			{at: 10 * time.Second, c: running("c1", true), outcome: Failure, ran: true},
			{at: 20 * time.Second, c: running("c1", true), outcome: Unknown, ran: true},
			{at: 30 * time.Second, c: running("c1", true), outcome: Failure, ran: true, want: upd(Readiness, "c1", Failure)},
		},
	}, {
		name: "readiness and liveness wait for startup",
		kind: Liveness,
		spec: v1.Probe{FailureThreshold: 1},
		steps: []step{
			{c: running("c1", false), outcome: Failure, want: &Update{Kind: Liveness, ContainerID: "c1", Result: Success}},
			{at: 10 * time.Second, c: running("c1", false), outcome: Failure},
			{at: 20 * time.Second, c: running("c1", true), outcome: Failure, ran: true, want: upd(Liveness, "c1", Failure)},
		},
	}, {
		name: "startup probe stops once started",
		kind: Startup,
		spec: v1.Probe{FailureThreshold: 30},
		steps: []step{
			{c: running("c1", false), outcome: Failure, ran: true},
			{at: 10 * time.Second, c: running("c1", false), outcome: Success, ran: true, want: upd(Startup, "c1", Success)},
			{at: 20 * time.Second, c: running("c1", true), outcome: Failure},
		},
	}, {
		name: "liveness failure holds until a new container",
		kind: Liveness,
		spec: v1.Probe{FailureThreshold: 2},
		steps: []step{
			{c: running("c1", true), outcome: Failure, ran: true, want: &Update{Kind: Liveness, ContainerID: "c1", Result: Success}},
			{at: 10 * time.Second, c: running("c1", true), outcome: Failure, ran: true, want: upd(Liveness, "c1", Failure)},
			{at: 20 * time.Second, c: running("c1", true), outcome: Failure},
			{at: 30 * time.Second, c: running("c2", true), outcome: Success, ran: true, want: &Update{Kind: Liveness, ContainerID: "c2", Result: Success}},
		},
	}, {
		name:    "exited container fails readiness; stops for restartPolicy Never",
		kind:    Readiness,
		restart: v1.RestartPolicyNever,
		steps: []step{
			{c: running("c1", true), outcome: Success, ran: true, want: upd(Readiness, "c1", Success)},
			{at: 10 * time.Second, c: Container{ID: "c1", Terminated: true}, want: &Update{Kind: Readiness, ContainerID: "c1", Result: Failure}, stop: true},
		},
	}, {
		name:    "exited container keeps the worker for restartPolicy Always",
		kind:    Readiness,
		restart: v1.RestartPolicyAlways,
		steps: []step{
			{c: running("c1", true), outcome: Success, ran: true, want: upd(Readiness, "c1", Success)},
			{at: 10 * time.Second, c: Container{ID: "c1", Terminated: true}, want: &Update{Kind: Readiness, ContainerID: "c1", Result: Failure}},
		},
	}, {
		name: "liveness retires as success when the pod is deleted",
		kind: Liveness,
		steps: []step{
			{c: running("c1", true), outcome: Success, ran: true, want: &Update{Kind: Liveness, ContainerID: "c1", Result: Success}},
			{at: 10 * time.Second, c: Container{ID: "c1", Running: true, StartedAt: t0, Started: true, PodDeleting: true}, stop: true},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			restart := tt.restart
			if restart == "" {
				restart = v1.RestartPolicyAlways
			}
			w := NewWorker(tt.kind, &tt.spec, restart)
			for i, s := range tt.steps {
				ran := false
				got, keepGoing := w.Step(context.Background(), s.c, t0.Add(s.at), func(context.Context) (Result, string) {
					ran = true
					return s.outcome, msgFor(s.outcome)
				})
				if ran != s.ran {
					t.Errorf("step %d: probe ran = %v, want %v", i, ran, s.ran)
				}
				if diff := cmp.Diff(s.want, got); diff != "" {
					t.Errorf("step %d: update (-want +got):\n%s", i, diff)
				}
				if keepGoing == s.stop {
					t.Errorf("step %d: keepGoing = %v, want %v", i, keepGoing, !s.stop)
				}
			}
		})
	}
}

func TestWorkerRun(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	w := NewWorker(Readiness, &v1.Probe{PeriodSeconds: 5, FailureThreshold: 2}, v1.RestartPolicyAlways)
	outcomes := make(chan Result, 10)
	probes := make(chan struct{}, 10)
	out := make(chan Update)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, clk, func() Container { return running("c1", true) }, func(context.Context) (Result, string) {
			probes <- struct{}{}
			return <-outcomes, ""
		}, out)
	}()
	expect := func(want Result) {
		t.Helper()
		select {
		case u := <-out:
			if u.Result != want {
				t.Fatalf("update %v, want %v", u.Result, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no update, want %v", want)
		}
	}
	tick := func(r Result) {
		t.Helper()
		outcomes <- r
		select {
		case <-probes:
		case <-time.After(5 * time.Second):
			t.Fatal("probe not run")
		}
	}

	tick(Success)
	expect(Success) // published as soon as the threshold is crossed

	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(5 * time.Second)
	tick(Failure)
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(5 * time.Second)
	tick(Failure)
	expect(Failure)

	w.Trigger()
	tick(Success)
	expect(Success)

	cancel()
	<-done
}
