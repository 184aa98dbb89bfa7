// Package leader runs a piece of work on one server of the cluster at a time, elected
// through a coordination.k8s.io Lease with client-go's leaderelection, as
// kube-controller-manager and kube-scheduler do. The work runs with a context that ends
// when the lease is lost; Run waits for the work to return before it campaigns again,
// so nothing the work started writes once another holder may have taken over.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// The lease names upstream's components elect themselves with, in kube-system.
const (
	ControllerManagerLease = "kube-controller-manager"
	SchedulerLease         = "kube-scheduler"
)

// Defaults are kube-controller-manager's and kube-scheduler's (--leader-elect-*).
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Timing is the election's three durations (--leader-elect-lease-duration,
// --leader-elect-renew-deadline, --leader-elect-retry-period).
type Timing struct {
	// LeaseDuration is how long non-leaders wait after the last observed renewal
	// before they take the lease over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying to renew before it gives
	// the lease up and stops its work.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between the leader's renewals; candidates read the
	// lease pollsPerRetry times as often (see throttledLock).
	RetryPeriod time.Duration
}

// pollsPerRetry is how many times per RetryPeriod a candidate reads the lease, and the
// leader's elector runs. client-go's leaderelection counts a lease as expired
// LeaseDuration after it *observed* the last renewal, and its candidates look every
// RetryPeriod to 2.2 × RetryPeriod (JitterFactor 1.2): with kube-controller-manager's
// 15 s / 2 s, a killed leader is replaced 15 to 23.8 s after its death (17.2 and 18.6 s
// in two runs of BenchmarkMachinesFailover), not within the lease duration + 2 s. With
// the elector running five times as often and the leader's renewals still written once
// per RetryPeriod, a candidate observes each renewal and the expiry within 0.44 × RetryPeriod:
// the takeover comes 13 to 16.8 s after a kill (at most LeaseDuration + 0.88 ×
// RetryPeriod), for the same writes and five times the candidates' reads.
//
// Only for a RetryPeriod of a second or more: client-go compares records through their
// JSON, where the renew time has whole seconds, so renewals less than a second apart
// may look the same to a candidate; written once a second or less often, each is seen.
// A shorter RetryPeriod (tests) runs as upstream's.
const pollsPerRetry = 5

// pacing returns how often the elector runs and how often the leader writes its
// renewals (0: at every run) for t.
func (t Timing) pacing() (elector, renewals time.Duration) {
	if t.RetryPeriod < time.Second {
		return t.RetryPeriod, 0
	}
	return t.RetryPeriod / pollsPerRetry, t.RetryPeriod
}

// DefaultTiming returns kube-controller-manager's defaults: 15s, 10s, 2s.
func DefaultTiming() Timing {
	return Timing{LeaseDuration: DefaultLeaseDuration, RenewDeadline: DefaultRenewDeadline, RetryPeriod: DefaultRetryPeriod}
}

// Validate reports durations the election cannot work with, naming the flags, with
// the rules client-go's leaderelection enforces.
func (t Timing) Validate() error {
	switch {
	case t.LeaseDuration <= 0 || t.RenewDeadline <= 0 || t.RetryPeriod <= 0:
		return errors.New("--leader-elect-lease-duration, --leader-elect-renew-deadline and --leader-elect-retry-period must be greater than zero")
	case t.LeaseDuration <= t.RenewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration (%s) must be greater than --leader-elect-renew-deadline (%s)", t.LeaseDuration, t.RenewDeadline)
	case float64(t.RenewDeadline) <= leaderelection.JitterFactor*float64(t.RetryPeriod):
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be greater than %.1f × --leader-elect-retry-period (%s)",
			t.RenewDeadline, leaderelection.JitterFactor, t.RetryPeriod)
	}
	return nil
}

// Identity returns a holder identity as upstream's components make it:
// <hostname>_<uuid>, unique per process.
func Identity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("leader election identity: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// Election is one lease and who campaigns for it.
type Election struct {
	Client kubernetes.Interface
	// Namespace and Name locate the Lease (kube-system/kube-controller-manager).
	Namespace, Name string
	// Identity is the holderIdentity written while leading.
	Identity string
	Timing   Timing
	// Recorder, when not nil, records the LeaderElection events upstream emits
	// ("<identity> became leader") on the Lease.
	Recorder record.EventRecorder
	Logger   *slog.Logger
}

// Run campaigns until ctx ends. Each time the lease is won, work runs with a context
// that ends when ctx ends or the lease is lost (no renewal within RenewDeadline); Run
// waits for work to return, then campaigns again. It returns once ctx ended and work,
// if it was running, returned.
//
// On the way out the lease is released (client-go's ReleaseOnCancel: holder cleared,
// leaseDurationSeconds 1), so that another candidate takes over at its next retry
// instead of after LeaseDuration. The release is written only after work returned:
// the elector's own context is cancelled then and not when ctx ends, and a release
// attempted while work may still run (the elector gives up after a failed renewal,
// before it cancels the work) is withheld, leaving the lease to expire as without it.
func (e *Election) Run(ctx context.Context, work func(ctx context.Context)) error {
	if err := e.Timing.Validate(); err != nil {
		return err
	}
	log := e.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("lease", e.Namespace+"/"+e.Name, "identity", e.Identity)
	rlc := resourcelock.ResourceLockConfig{Identity: e.Identity}
	if e.Recorder != nil {
		rlc.EventRecorder = e.Recorder
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, e.Namespace, e.Name, e.Client.CoreV1(), e.Client.CoordinationV1(), rlc)
	if err != nil {
		return fmt.Errorf("lease %s/%s: %w", e.Namespace, e.Name, err)
	}
	_, renewals := e.Timing.pacing()
	for ctx.Err() == nil {
		if err := e.term(ctx, &gatedLock{Interface: &throttledLock{Interface: lock, every: renewals}}, work, log); err != nil {
			return err
		}
	}
	return nil
}

// term is one campaign: it returns once the lease was lost, or once ctx ended and the
// lease was given up.
func (e *Election) term(ctx context.Context, lock *gatedLock, work func(ctx context.Context), log *slog.Logger) error {
	// The elector runs under its own context, cancelled only once no work runs: then
	// it stops renewing and releases the lease.
	electorCtx, stopElector := context.WithCancel(context.Background())
	defer stopElector()
	// client-go starts OnStartedLeading on a goroutine of its own; whether the work
	// began is settled under mu, so that work never starts after the term ended.
	var mu sync.Mutex
	var began, over bool
	done := make(chan struct{})
	stopWatching := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !began {
			// No work runs and none will start: give the lease up if it was won.
			over = true
			lock.mayRelease.Store(true)
			stopElector()
		}
	})
	defer stopWatching()
	electorPeriod, _ := e.Timing.pacing()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.Timing.LeaseDuration,
		RenewDeadline:   e.Timing.RenewDeadline,
		RetryPeriod:     electorPeriod,
		ReleaseOnCancel: true,
		Name:            e.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				if over {
					mu.Unlock()
					return
				}
				began = true
				mu.Unlock()
				defer close(done)
				log.Info("became leader")
				wctx, cancel := context.WithCancel(lctx)
				stop := context.AfterFunc(ctx, cancel)
				work(wctx)
				stop()
				cancel()
				// Every write of the work is done: only now may the lease go.
				lock.mayRelease.Store(true)
				stopElector()
			},
			// Called when le.Run returns, after the work's context was cancelled.
			OnStoppedLeading: func() {},
			OnNewLeader: func(holder string) {
				if holder != e.Identity {
					log.Info("another server leads", "holder", holder)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("lease %s/%s: %w", e.Namespace, e.Name, err)
	}
	le.Run(electorCtx)
	mu.Lock()
	over = true
	led := began
	mu.Unlock()
	if led {
		<-done
		if ctx.Err() == nil {
			log.Warn("lost the lease: work stopped, campaigning again")
		} else {
			log.Info("stopped leading")
		}
	}
	return nil
}

// errReleaseWithheld refuses a release while the lease's work may still write.
var errReleaseWithheld = errors.New("release withheld: the work of this term has not returned yet")

// gatedLock is the election's lock for one term: it refuses the release record (an
// update clearing the holder) until mayRelease is set, once the term's work returned.
type gatedLock struct {
	resourcelock.Interface
	mayRelease atomic.Bool
}

func (l *gatedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	if r.HolderIdentity == "" && !l.mayRelease.Load() {
		return errReleaseWithheld
	}
	return l.Interface.Update(ctx, r)
}

// throttledLock writes the leader's renewals at most once per every: an update that
// only moves the renew time of the record it last wrote, less than every after that
// write, is not sent and reports success. The elector runs pollsPerRetry times per
// RetryPeriod so that candidates notice renewals and expiry early; the leader's lease
// is still written once per RetryPeriod. Safety is as upstream's: a leader whose writes
// fail stops within every + RenewDeadline of its last write, before LeaseDuration.
type throttledLock struct {
	resourcelock.Interface
	every time.Duration

	mu sync.Mutex
	// last is the record this lock last wrote (Create or Update), at written.
	last    *resourcelock.LeaderElectionRecord
	written time.Time
}

func (l *throttledLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, r)
	l.remember(r, err)
	return err
}

func (l *throttledLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	skip := l.last != nil && time.Since(l.written) < l.every && onlyRenewed(*l.last, r)
	l.mu.Unlock()
	if skip {
		return nil
	}
	err := l.Interface.Update(ctx, r)
	l.remember(r, err)
	return err
}

func (l *throttledLock) remember(r resourcelock.LeaderElectionRecord, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.last = nil
		return
	}
	l.last, l.written = &r, time.Now()
}

// onlyRenewed says whether next differs from last in its renew time alone.
func onlyRenewed(last, next resourcelock.LeaderElectionRecord) bool {
	last.RenewTime = next.RenewTime
	return last == next
}
