package probe

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Kind says which probe of a container a Worker runs.
type Kind string

// The three probe kinds, spelt as kubelet's events spell them ("Readiness probe failed").
const (
	Liveness  Kind = "Liveness"
	Readiness Kind = "Readiness"
	Startup   Kind = "Startup"
)

// initialResult is a probe's result before its first verdict: a container is not ready
// until proven so, is alive until proven dead, and has not started until proven so.
func (k Kind) initialResult() Result {
	switch k {
	case Readiness:
		return Failure
	case Liveness:
		return Success
	default:
		return Unknown
	}
}

// Container is the worker's view of the probed container at one moment.
type Container struct {
	// ID is the runtime's container id; empty before the container is created. A new
	// id (a restart) resets the worker.
	ID string
	// Running is true while the process runs, since StartedAt.
	Running   bool
	StartedAt time.Time
	// Terminated is true when the container exited and is not running.
	Terminated bool
	// Started is true once the startup probe succeeded (or immediately for a container
	// without one); liveness and readiness wait for it.
	Started bool
	// PodDeleting is true once the pod has a deletionTimestamp: liveness and startup
	// probes then stop, reporting success, so shutdown is not mistaken for death.
	PodDeleting bool
}

// Update is a change of one probe's result, sent when the result a container is judged
// by changes (or a new container id gets its initial result).
type Update struct {
	Kind        Kind
	ContainerID string
	Result      Result
	// Message is the probe's message for the outcome that crossed the threshold.
	Message string
}

// RunFunc runs the probe once; Prober.Probe bound to a pod and container is one.
type RunFunc func(ctx context.Context) (Result, string)

// Worker is the state machine of one probe of one container, kubelet's probe worker:
// it probes every periodSeconds after initialDelaySeconds from the container's start,
// counts consecutive outcomes against successThreshold and failureThreshold, gates
// liveness and readiness on the startup probe, and holds a liveness or startup failure
// until the container is restarted (a new id). Step is pure apart from the probe it is
// given; Run drives it with a clock.
type Worker struct {
	kind          Kind
	spec          v1.Probe
	restartPolicy v1.RestartPolicy
	trigger       chan struct{}

	containerID string
	result      Result
	lastOutcome Result
	run         int
	onHold      bool
}

// NewWorker returns a worker for spec, a probe of the given kind in a pod with the given
// restart policy. Zero periods and thresholds take the API defaults (10 s, 1, 3).
func NewWorker(kind Kind, spec *v1.Probe, restartPolicy v1.RestartPolicy) *Worker {
	w := &Worker{kind: kind, restartPolicy: restartPolicy, trigger: make(chan struct{}, 1), result: Unknown}
	if spec != nil {
		w.spec = *spec
	}
	if w.spec.PeriodSeconds <= 0 {
		w.spec.PeriodSeconds = 10
	}
	if w.spec.SuccessThreshold <= 0 {
		w.spec.SuccessThreshold = 1
	}
	if w.spec.FailureThreshold <= 0 {
		w.spec.FailureThreshold = 3
	}
	return w
}

// Period is the interval between two probes.
func (w *Worker) Period() time.Duration { return time.Duration(w.spec.PeriodSeconds) * time.Second }

// Result is the result the container is currently judged by (Unknown before any
// container was seen).
func (w *Worker) Result() Result { return w.result }

// Trigger asks Run to step now rather than at the next period, as kubelet does for
// readiness and liveness the moment a startup probe succeeds. It never blocks.
func (w *Worker) Trigger() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

// Step observes the container c at now and, when a probe is due, runs it. It returns the
// update to publish (nil when the result did not change) and whether the worker should
// keep going: it stops when the container exited for good (restartPolicy Never) or when
// a liveness or startup probe is retired by the pod's deletion.
func (w *Worker) Step(ctx context.Context, c Container, now time.Time, probe RunFunc) (*Update, bool) {
	if c.ID == "" {
		return nil, true
	}
	var update *Update
	if c.ID != w.containerID {
		w.containerID = c.ID
		w.onHold = false
		w.run = 0
		w.lastOutcome = Unknown
		update = w.set(w.kind.initialResult(), "")
	}
	if w.onHold {
		return update, true
	}
	if !c.Running {
		if u := w.set(Failure, ""); u != nil {
			update = u
		}
		return update, !c.Terminated || w.restartPolicy != v1.RestartPolicyNever
	}
	if c.PodDeleting && (w.kind == Liveness || w.kind == Startup) {
		if u := w.set(Success, ""); u != nil {
			update = u
		}
		return update, false
	}
	if now.Sub(c.StartedAt) < time.Duration(w.spec.InitialDelaySeconds)*time.Second {
		return update, true
	}
	if w.kind == Startup && c.Started {
		// The startup probe's job is done for this container.
		return update, true
	}
	if w.kind != Startup && !c.Started {
		// Liveness and readiness wait for the startup probe.
		return update, true
	}
	outcome, msg := probe(ctx)
	if outcome == Unknown {
		// The probe could not run (kubelet's "probe errored"): the outcome says
		// nothing about the container, so it is not counted.
		return update, true
	}
	if outcome == w.lastOutcome {
		w.run++
	} else {
		w.lastOutcome, w.run = outcome, 1
	}
	if (outcome == Failure && w.run < int(w.spec.FailureThreshold)) ||
		(outcome == Success && w.run < int(w.spec.SuccessThreshold)) {
		return update, true
	}
	if u := w.set(outcome, msg); u != nil {
		update = u
	}
	if outcome == Failure && (w.kind == Liveness || w.kind == Startup) {
		// The container is going to be restarted: probing it while it stops would only
		// produce noise, so wait for the next container id.
		w.onHold = true
		w.run = 0
	}
	return update, true
}

// set records r as the container's result and returns the update when it changed.
func (w *Worker) set(r Result, msg string) *Update {
	if r == w.result {
		return nil
	}
	w.result = r
	return &Update{Kind: w.kind, ContainerID: w.containerID, Result: r, Message: msg}
}

// Run steps the worker at once, then every period and on Trigger, until ctx is done or
// Step says to stop. state returns the container's current view; updates are sent on
// out as soon as Step produces them (a readiness change is published the moment its
// threshold is crossed, not at the next sync).
func (w *Worker) Run(ctx context.Context, clk clock.WithTicker, state func() Container, probe RunFunc, out chan<- Update) {
	ticker := clk.NewTicker(w.Period())
	defer ticker.Stop()
	for {
		update, keepGoing := w.Step(ctx, state(), clk.Now(), probe)
		if update != nil {
			select {
			case out <- *update:
			case <-ctx.Done():
				return
			}
		}
		if !keepGoing {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-w.trigger:
		}
	}
}
