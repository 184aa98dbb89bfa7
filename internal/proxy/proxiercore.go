package proxy

import (
	"context"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// proxierCore is what the three modes' proxiers share: the change trackers the event
// handlers feed, the wake-up of the sync loop, and the loop itself (rate limit, periodic
// full sync, retry after a failure). A mode embeds it and brings its own Sync.
type proxierCore struct {
	cfg     ProxierConfig
	svcs    *ServiceChangeTracker
	eps     *EndpointsChangeTracker
	metrics *metrics
	wake    chan struct{}

	mu       sync.Mutex // serialises Sync
	needFull bool
	lastFull time.Time
}

// withDefaults fills in the ProxierConfig fields every mode defaults the same way.
func withDefaults(cfg ProxierConfig) ProxierConfig {
	if cfg.FullSyncPeriod <= 0 {
		cfg.FullSyncPeriod = time.Hour
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}

// newProxierCore returns the shared part of a proxier whose first sync is full.
func newProxierCore(cfg ProxierConfig, m *metrics) proxierCore {
	return proxierCore{cfg: cfg, metrics: m, svcs: NewServiceChangeTracker(), eps: NewEndpointsChangeTracker(cfg.ServiceCIDR),
		wake: make(chan struct{}, 1), needFull: true}
}

// OnServiceAdd records a Service creation.
func (p *proxierCore) OnServiceAdd(svc *v1.Service) { p.noteChange(p.svcs.Update(nil, svc)) }

// OnServiceUpdate records a Service update.
func (p *proxierCore) OnServiceUpdate(old, svc *v1.Service) { p.noteChange(p.svcs.Update(old, svc)) }

// OnServiceDelete records a Service deletion.
func (p *proxierCore) OnServiceDelete(svc *v1.Service) { p.noteChange(p.svcs.Update(svc, nil)) }

// OnEndpointSliceAdd records an EndpointSlice creation.
func (p *proxierCore) OnEndpointSliceAdd(s *discoveryv1.EndpointSlice) { p.sliceChanged(s, false) }

// OnEndpointSliceUpdate records an EndpointSlice update.
func (p *proxierCore) OnEndpointSliceUpdate(_, s *discoveryv1.EndpointSlice) {
	p.sliceChanged(s, false)
}

// OnEndpointSliceDelete records an EndpointSlice deletion.
func (p *proxierCore) OnEndpointSliceDelete(s *discoveryv1.EndpointSlice) { p.sliceChanged(s, true) }

// sliceChanged records a slice event; what became unusable in the slice is reported
// once (a Warning Event and a log line) and skipped.
func (p *proxierCore) sliceChanged(s *discoveryv1.EndpointSlice, deleted bool) {
	changed, unusable := p.eps.UpdateReporting(s, deleted)
	if len(unusable) > 0 {
		p.reportUnusable(s, unusable)
	}
	p.noteChange(changed)
}

// SetZone records the node's zone (its topology.kubernetes.io/zone label), which decides
// the endpoints zone hints give it. A change rewrites every service with the next sync.
func (p *proxierCore) SetZone(zone string) {
	p.mu.Lock()
	changed := p.cfg.Zone != zone
	if changed {
		p.cfg.Logger.Info("node zone changed", "node", p.cfg.NodeName, "from", p.cfg.Zone, "to", zone)
		p.cfg.Zone = zone
		p.needFull = true
	}
	p.mu.Unlock()
	if changed {
		p.poke()
	}
}

func (p *proxierCore) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *proxierCore) noteChange(changed bool) {
	p.metrics.servicesPending.Set(float64(p.svcs.PendingCount()))
	p.metrics.endpointsPending.Set(float64(p.eps.PendingCount()))
	if !changed {
		return
	}
	if p.cfg.Health != nil {
		p.cfg.Health.QueuedUpdate()
	}
	p.metrics.lastQueued.Set(float64(p.cfg.Now().UnixNano()) / 1e9)
	p.poke()
}

// runLoop calls sync whenever changes arrive, at most once per MinSyncPeriod, fully
// every FullSyncPeriod, and again after RetryPeriod (fully) when it fails or when again
// (nil: never) says there is more to do soon. It returns when ctx is cancelled. mode
// names the rules in the failure's log line.
func (p *proxierCore) runLoop(ctx context.Context, mode string, sync func(context.Context) error, again func() bool) {
	full := time.NewTimer(p.cfg.FullSyncPeriod)
	defer full.Stop()
	retry := time.NewTimer(0) // first sync at once
	defer retry.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-retry.C:
		case <-full.C:
			p.mu.Lock()
			p.needFull = true
			p.mu.Unlock()
		}
		if wait := p.cfg.MinSyncPeriod - p.cfg.Now().Sub(last); !last.IsZero() && wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = p.cfg.Now()
		err := sync(ctx)
		if err != nil {
			p.cfg.Logger.Error("syncing "+mode+" proxy rules failed, retrying with a full sync", "node", p.cfg.NodeName, "err", err)
		}
		if err != nil || (again != nil && again()) {
			retry.Reset(p.cfg.RetryPeriod)
		}
		full.Reset(p.cfg.FullSyncPeriod - p.cfg.Now().Sub(p.lastFullSync()))
	}
}

func (p *proxierCore) lastFullSync() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastFull
}
