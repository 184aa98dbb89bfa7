package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
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

// serviceOutcome is what a mode's rules for one service tell the bookkeeping after a
// sync: its UDP frontends and the endpoints they send to (for the conntrack cleanup),
// and the ports whose Local policy finds no endpoint on this node although the service
// has some elsewhere.
type serviceOutcome struct {
	udp                              []frontend
	noLocalInternal, noLocalExternal int
}

// syncState is the bookkeeping the nftables and iptables proxiers keep across syncs,
// guarded by their mu.
type syncState struct {
	// health holds the healthCheckNodePort state of every service that has one;
	// noLocal the ports of each service whose Local policy finds no local endpoint.
	health  map[types.NamespacedName]ServiceHealth
	noLocal map[types.NamespacedName][2]int
	// rejected are the services whose rules the kernel refused at their last try: they
	// are left out until they change or the next full sync.
	rejected sets.Set[types.NamespacedName]
}

func newSyncState() syncState {
	return syncState{health: map[types.NamespacedName]ServiceHealth{}, noLocal: map[types.NamespacedName][2]int{},
		rejected: sets.New[types.NamespacedName]()}
}

// afterSync does what follows a successful write of the changed services, whatever the
// mode: delete the UDP conntrack entries of endpoints no longer used, update the health
// check ports and the no-local-endpoints gauges.
func afterSync[R interface{ outcome() *serviceOutcome }](p *proxierCore, st *syncState, desired, previous map[types.NamespacedName]R) {
	var stale []StaleFlow
	healthChanged := false
	for n, r := range desired {
		cur := r.outcome()
		var oldUDP []frontend
		if old, ok := previous[n]; ok && old.outcome() != nil {
			oldUDP = old.outcome().udp
		}
		stale = append(stale, staleFlows(oldUDP, cur.udp)...)
		h, ok := serviceHealth(p.svcs.Ports(n), p.eps.Endpoints(n), p.cfg.NodeName)
		if st.rejected.Has(n) {
			h, ok = ServiceHealth{}, false // the node does not proxy it: no health to tell
		}
		if was, had := st.health[n]; had != ok || was != h {
			healthChanged = true
			if ok {
				st.health[n] = h
			} else {
				delete(st.health, n)
			}
		}
		if cur.noLocalInternal+cur.noLocalExternal > 0 {
			st.noLocal[n] = [2]int{cur.noLocalInternal, cur.noLocalExternal}
		} else {
			delete(st.noLocal, n)
		}
	}
	if len(stale) > 0 && p.cfg.Conntrack != nil {
		if n, err := p.cfg.Conntrack.DeleteUDP(stale); err != nil {
			p.cfg.Logger.Warn("cleaning up UDP conntrack entries", "node", p.cfg.NodeName, "flows", fmt.Sprint(stale), "err", err)
		} else {
			p.cfg.Logger.Debug("deleted stale UDP conntrack entries", "node", p.cfg.NodeName, "flows", fmt.Sprint(stale), "entries", n)
		}
	}
	if healthChanged && p.cfg.ServiceHealth != nil {
		if err := p.cfg.ServiceHealth.Sync(cloneHealth(st.health)); err != nil {
			p.cfg.Logger.Warn("serving health check node ports", "node", p.cfg.NodeName, "err", err)
		}
	}
	var internal, external int
	for _, c := range st.noLocal {
		internal += c[0]
		external += c[1]
	}
	p.metrics.noLocalEndpoints.WithLabelValues("internal").Set(float64(internal))
	p.metrics.noLocalEndpoints.WithLabelValues("external").Set(float64(external))
}

// beginSync drains the change trackers at the start of a Sync (mu held): the services
// to rewrite, when their endpoint changes were first noticed, and whether this sync
// must be full (the first, after a failure or a zone change, or when one is due).
func (p *proxierCore) beginSync() (start time.Time, changed sets.Set[types.NamespacedName], triggers []time.Time, full bool) {
	start = p.cfg.Now()
	changed = p.svcs.Drain()
	epChanged, triggers := p.eps.Drain()
	changed = changed.Union(epChanged)
	p.metrics.serviceChanges.Add(float64(changed.Len()))
	p.metrics.endpointChanges.Add(float64(epChanged.Len()))
	full = p.needFull || start.Sub(p.lastFull) >= p.cfg.FullSyncPeriod
	return start, changed, triggers, full
}

// finishSync records a successful Sync begun at start (mu held): the sync metrics and
// network programming latency, the end of a full sync, and the health server's view.
// It returns the sync's duration in seconds.
func (p *proxierCore) finishSync(start time.Time, full bool, triggers []time.Time) (elapsed float64) {
	end := p.cfg.Now()
	elapsed = end.Sub(start).Seconds()
	p.metrics.syncDuration.Observe(elapsed)
	if full {
		p.needFull = false
		p.lastFull = start
		p.metrics.fullSyncDuration.Observe(elapsed)
	} else {
		p.metrics.partialSyncDuration.Observe(elapsed)
	}
	for _, t := range triggers {
		p.metrics.programmingLatency.Observe(end.Sub(t).Seconds())
	}
	p.metrics.lastSync.Set(float64(end.UnixNano()) / 1e9)
	if p.cfg.Health != nil {
		p.cfg.Health.Updated()
		if p.svcs.PendingCount()+p.eps.PendingCount() > 0 {
			p.cfg.Health.QueuedUpdate() // arrived during this sync
		}
	}
	return elapsed
}
