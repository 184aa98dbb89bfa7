package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/controller/manager"
	"github.com/tranche/tranche/internal/events"
	"github.com/tranche/tranche/internal/leader"
)

// LeaderElection configures how the controller manager and the scheduler are elected
// (kube-controller-manager's --leader-elect flags).
type LeaderElection struct {
	// Enabled runs them only while this server holds their leases; disabled, they run
	// at once (a single server over its embedded etcd).
	Enabled bool
	leader.Timing
}

// electedUnit is a manager that runs on one server at a time, under lease.
type electedUnit struct {
	lease     string
	component string // events' source, as upstream's component names
	m         *manager.Manager
}

// runUnelected starts every unit at once; see startControllers.
func runUnelected(ctx context.Context, units []electedUnit) (<-chan error, error) {
	errs := make([]chan error, len(units))
	for i, u := range units {
		started := make(chan struct{})
		u.m.Started = func() { close(started) }
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- u.m.Run(ctx) }()
		select {
		case <-started:
		case err := <-errs[i]:
			return nil, err
		}
	}
	stopped := make(chan error, 1)
	go func() {
		var all []error
		for _, e := range errs {
			all = append(all, <-e)
		}
		stopped <- errors.Join(all...)
	}()
	return stopped, nil
}

// runElected campaigns for every unit's lease; a unit's manager runs while its lease is
// held and has stopped every worker before the next campaign. A manager that fails to
// start (a constructor error) is retried every retry period while the lease is held.
// When ctx ends, each lease is released once its manager's workers have returned (see
// leader.Election.Run), so that another server takes over at once; the caller keeps
// the API server up until stopped yields, for that last write.
func runElected(ctx context.Context, client kubernetes.Interface, units []electedUnit, election LeaderElection, log *slog.Logger) (<-chan error, error) {
	if err := election.Validate(); err != nil {
		return nil, err
	}
	id, err := leader.Identity()
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(units))
	for _, u := range units {
		if u.m.Metrics != nil {
			u.m.Metrics = reregistering{u.m.Metrics}
		}
		e := &leader.Election{Client: client, Namespace: "kube-system", Name: u.lease, Identity: id, Timing: election.Timing,
			Recorder: events.NewRecorder(ctx, client, u.component), Logger: log.With("component", "leader-election")}
		wg.Go(func() {
			errs <- e.Run(ctx, func(ctx context.Context) {
				for {
					err := u.m.Run(ctx)
					if err == nil || ctx.Err() != nil {
						return
					}
					log.Error("controller manager did not start; retrying while leading", "lease", u.lease, "err", err)
					select {
					case <-ctx.Done():
						return
					case <-time.After(election.RetryPeriod):
					}
				}
			})
		})
	}
	stopped := make(chan error, 1)
	go func() {
		wg.Wait()
		close(errs)
		var all []error
		for e := range errs {
			all = append(all, e)
		}
		stopped <- errors.Join(all...)
	}()
	return stopped, nil
}

// reregistering lets a manager run again after it lost and regained its lease: the
// controllers of the new term register collectors named as the last term's, which
// replace them (their counts start again, as in a restarted kube-controller-manager).
type reregistering struct{ prometheus.Registerer }

func (r reregistering) Register(c prometheus.Collector) error {
	err := r.Registerer.Register(c)
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		r.Registerer.Unregister(dup.ExistingCollector)
		return r.Registerer.Register(c)
	}
	return err
}

func (r reregistering) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}
