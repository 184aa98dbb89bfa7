// Package manager runs the control plane's controllers as one unit, as
// kube-controller-manager does: a list of descriptors (a name and a constructor), one
// shared informer factory, and a Run that starts them all and returns only once every one
// has stopped. Leader election switches the unit on and off by calling Run with a context
// it cancels when leadership is lost; Run may be called again afterwards.
package manager

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Context is what every controller's constructor gets, shared by all of them.
type Context struct {
	Client kubernetes.Interface
	// Informers is the factory every controller takes its informers from; the manager
	// starts it once all controllers are constructed and stops it after they returned.
	Informers informers.SharedInformerFactory
	// Logger carries the attribute controller=<descriptor name>.
	Logger *slog.Logger
	// Metrics is where controllers register their own metrics (the served registry).
	Metrics prometheus.Registerer
}

// Controller is one constructed controller.
type Controller interface {
	// Run runs the controller until ctx ends and returns once every goroutine it
	// started has returned.
	Run(ctx context.Context)
}

// Synced is implemented by controllers that read informer caches: the manager calls Run
// only once HasSynced reports true, or once the manager stops (so that Run releases what
// the constructor set up).
type Synced interface {
	HasSynced() bool
}

// Descriptor is a controller as the manager knows it.
type Descriptor struct {
	// Name identifies the controller in logs ("endpointslice").
	Name string
	// Disabled leaves the controller out: it is not even constructed.
	Disabled bool
	// New constructs the controller and registers its event handlers on c.Informers.
	// ctx ends when the manager stops (event recorders may bind to it). A nil
	// Controller with a nil error means there is nothing to run in this configuration.
	New func(ctx context.Context, c Context) (Controller, error)
}

// Manager constructs, starts and stops a set of controllers together.
type Manager struct {
	Client kubernetes.Interface
	// Resync is the informer factory's resync period (0: none).
	Resync      time.Duration
	Logger      *slog.Logger
	Metrics     prometheus.Registerer
	Descriptors []Descriptor
	// Started, when not nil, is called once every controller is constructed and its
	// informers started, before Run blocks.
	Started func()
}

type running struct {
	name string
	c    Controller
}

// Run constructs every enabled controller on a fresh informer factory, starts the
// factory, starts each controller once its caches are in, and blocks until ctx ends; it
// then waits for every controller's Run to return and stops the informers. A constructor
// error stops Run before anything runs and names the controller.
func (m *Manager) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := m.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	factory := informers.NewSharedInformerFactory(m.Client, m.Resync)
	defer factory.Shutdown()
	var all []running
	for _, d := range m.Descriptors {
		if d.Disabled {
			log.Info("controller disabled", "controller", d.Name)
			continue
		}
		c, err := d.New(ctx, Context{Client: m.Client, Informers: factory, Logger: log.With("controller", d.Name), Metrics: m.Metrics})
		if err != nil {
			return fmt.Errorf("starting controller %s: %w", d.Name, err)
		}
		if c != nil {
			all = append(all, running{d.Name, c})
		}
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	for _, r := range all {
		wg.Go(func() {
			if s, ok := r.c.(Synced); ok {
				cache.WaitForCacheSync(ctx.Done(), s.HasSynced)
			}
			// Run even when the caches never filled: ctx has ended then, and the
			// controller releases what New set up (its queue) without syncing.
			r.c.Run(ctx)
		})
	}
	log.Info("controllers started", "count", len(all))
	if m.Started != nil {
		m.Started()
	}
	<-ctx.Done()
	wg.Wait()
	log.Info("controllers stopped", "count", len(all))
	return nil
}

// Workers adapts a controller whose Run takes a number of workers; HasSynced is passed
// through when the controller has it.
func Workers(c interface {
	Run(ctx context.Context, workers int)
}, n int) Controller {
	return workers{c, n}
}

type workers struct {
	c interface {
		Run(ctx context.Context, workers int)
	}
	n int
}

func (w workers) Run(ctx context.Context) { w.c.Run(ctx, w.n) }

func (w workers) HasSynced() bool {
	s, ok := w.c.(Synced)
	return !ok || s.HasSynced()
}
