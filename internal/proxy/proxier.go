package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/knftables"
)

// ProxierConfig configures a Proxier.
type ProxierConfig struct {
	Config
	// MinSyncPeriod is the least time between two syncs; 0 syncs as soon as something
	// changes, which keeps network programming latency lowest.
	MinSyncPeriod time.Duration
	// FullSyncPeriod forces a full rewrite of the table this often (default one hour),
	// repairing anything changed behind the proxy's back.
	FullSyncPeriod time.Duration
	// RetryPeriod is the wait before retrying a failed sync (default one second).
	RetryPeriod time.Duration
	// Logger receives sync results and errors (default: discarded).
	Logger *slog.Logger
	// Registerer receives the kubeproxy_* metrics (nil: not registered).
	Registerer prometheus.Registerer
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Health is told about queued changes and successful syncs (nil: nobody).
	Health SyncRecorder
	// ServiceHealth serves the healthCheckNodePorts of externalTrafficPolicy Local
	// services; it gets every such service after each sync that changed one (nil: none).
	ServiceHealth interface {
		Sync(map[types.NamespacedName]ServiceHealth) error
	}
	// Conntrack deletes UDP conntrack entries that point at endpoints no longer used
	// (nil: entries are left to time out).
	Conntrack Conntrack
	// Recorder receives the Warning Events about skipped input: unusable endpoint
	// addresses and Services whose rules the kernel refused (nil: logs only).
	Recorder EventRecorder
}

// Proxier turns Service and EndpointSlice events into the node's nftables table. Event
// handlers (On*) only record changes and wake the runner; Sync applies them in one
// transaction. Safe for concurrent use.
type Proxier struct {
	proxierCore
	nft knftables.Interface

	st *tableState // guarded by mu
	syncState
}

// NewProxier returns a Proxier writing to nft, whose family and table must be ip and
// TableName. The caller creates nft inside the node's network namespace.
func NewProxier(nft knftables.Interface, cfg ProxierConfig) (*Proxier, error) {
	if nft == nil {
		return nil, errors.New("proxy: nil nftables interface")
	}
	if !cfg.ClusterCIDR.IsValid() || !cfg.ServiceCIDR.IsValid() {
		return nil, fmt.Errorf("proxy: node %q: cluster CIDR %v and service CIDR %v must both be set", cfg.NodeName, cfg.ClusterCIDR, cfg.ServiceCIDR)
	}
	cfg = withDefaults(cfg)
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("proxy: node %q: %w", cfg.NodeName, err)
	}
	return &Proxier{
		proxierCore: newProxierCore(cfg, m), nft: nft, st: newTableState(0, 0),
		syncState: newSyncState(),
	}, nil
}

// Run syncs whenever changes arrive, at most once per MinSyncPeriod, fully every
// FullSyncPeriod, and again after RetryPeriod (fully) when a sync fails. It returns
// when ctx is cancelled.
func (p *Proxier) Run(ctx context.Context) { p.runLoop(ctx, "nftables", p.Sync, nil) }

// Sync writes pending changes in one nftables transaction: only the changed services,
// or everything when the previous sync failed, none has run yet, or a full sync is due.
// When the kernel refuses a full sync, or a partial one that retries services it
// refused before, Sync finds the services it refuses (see isolate) and programs all
// the others, recording a Warning Event on each service left out. Any other error
// makes the next Sync full.
func (p *Proxier) Sync(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	start, changed, triggers, full := p.beginSync()
	var ex *existing
	if full {
		var err error
		if ex, err = listExisting(ctx, p.nft, p.cfg.Config); err != nil {
			p.needFull = true
			p.metrics.failures.Inc()
			return fmt.Errorf("node %q: %w", p.cfg.NodeName, err)
		}
		changed = changed.Union(p.svcs.Names()).Union(p.stateNames())
	}
	desired := make(map[types.NamespacedName]*serviceRules, changed.Len())
	previous := make(map[types.NamespacedName]*serviceRules, changed.Len())
	for n := range changed {
		desired[n] = buildService(p.cfg.Config, p.svcs.Ports(n), p.eps.Endpoints(n))
		previous[n] = p.st.services[n]
	}
	p.metrics.servicesPending.Set(float64(p.svcs.PendingCount()))
	p.metrics.endpointsPending.Set(float64(p.eps.PendingCount()))
	// Services refused before are suspects: a partial sync retrying one of them keeps
	// a copy of the state to isolate it from if the kernel refuses it again.
	suspects := p.rejected.Intersection(changed)
	var before *tableState
	if !full && suspects.Len() > 0 {
		before = p.st.clone()
	}
	pl := planSync(p.cfg.Config, p.st, desired, ex)
	var refused map[types.NamespacedName]error
	if err := apply(ctx, p.nft, pl); err != nil {
		p.metrics.failures.Inc()
		if full || suspects.Len() > 0 {
			st, applied, r, ierr := p.isolate(ctx, before, desired, ex, suspects, err)
			if err = ierr; err == nil {
				p.st, pl, refused = st, applied, r
			}
		}
		if err != nil {
			// The in-memory copy no longer matches the kernel: start again from scratch.
			p.st = newTableState(0, 0)
			p.needFull = true
			return fmt.Errorf("node %q: applying %d nftables operations for %d services: %w", p.cfg.NodeName, pl.numOperations(), len(desired), err)
		}
	}
	elapsed := p.finishSync(start, full, triggers)
	for n := range p.rejected {
		if _, still := refused[n]; changed.Has(n) && !still {
			p.rejected.Delete(n)
			if p.svcs.Ports(n) != nil {
				p.cfg.Logger.Info("service programmed again after the kernel refused it", "node", p.cfg.NodeName, "service", n.String())
			}
		}
	}
	for _, n := range slices.SortedFunc(maps.Keys(refused), compareNames) {
		p.rejected.Insert(n)
		desired[n] = &serviceRules{} // what the table now holds for it
		p.reportRejected(p.svcs.Ref(n), refused[n])
	}
	afterSync(&p.proxierCore, &p.syncState, desired, previous)
	p.cfg.Logger.Debug("synced proxy rules", "node", p.cfg.NodeName, "full", full, "services", len(desired), "operations", pl.numOperations(), "seconds", elapsed)
	return nil
}

// serviceHealth returns what a service's healthCheckNodePort says on node: the number
// of the node's ready endpoints (each address once, whatever the port). ok is false
// when the service has no such port.
func serviceHealth(ports map[ServicePortName]*ServicePort, eps map[ServicePortName][]Endpoint, node string) (h ServiceHealth, ok bool) {
	hasPort := false
	for _, sp := range ports {
		hasPort = hasPort || sp.HealthCheckNodePort != 0
	}
	if !hasPort {
		return h, false // most services: no set to allocate
	}
	local := sets.New[netip.Addr]()
	for spn, sp := range ports {
		if sp.HealthCheckNodePort == 0 {
			continue
		}
		h.Port, ok = sp.HealthCheckNodePort, true
		for _, e := range eps[spn] {
			if e.Ready && e.NodeName == node {
				local.Insert(e.IP)
			}
		}
	}
	h.LocalEndpoints = local.Len()
	return h, ok
}

func (p *Proxier) stateNames() sets.Set[types.NamespacedName] {
	return sets.KeySet(p.st.services)
}

// metrics are kube-proxy's, under the same names, so dashboards work unchanged.
type metrics struct {
	syncDuration, fullSyncDuration, partialSyncDuration prometheus.Histogram
	programmingLatency                                  prometheus.Histogram
	lastSync, lastQueued                                prometheus.Gauge
	servicesPending, endpointsPending                   prometheus.Gauge
	noLocalEndpoints                                    *prometheus.GaugeVec
	failures, serviceChanges, endpointChanges           prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	m := &metrics{
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds", Buckets: syncBuckets}),
		fullSyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubeproxy", Name: "sync_full_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds for full resyncs", Buckets: syncBuckets}),
		partialSyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubeproxy", Name: "sync_partial_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds for partial resyncs", Buckets: syncBuckets}),
		programmingLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubeproxy", Name: "network_programming_duration_seconds",
			Help: "In Cluster Network Programming Latency in seconds", Buckets: prometheus.ExponentialBuckets(0.001, 2, 20)}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_last_timestamp_seconds",
			Help: "The last time proxy rules were successfully synced"}),
		lastQueued: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_last_queued_timestamp_seconds",
			Help: "The last time a sync of proxy rules was queued"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_nftables_sync_failures_total",
			Help: "Cumulative proxy nftables sync failures"}),
		serviceChanges: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_service_changes_total",
			Help: "Cumulative proxy rules Service changes"}),
		endpointChanges: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_endpoint_changes_total",
			Help: "Cumulative proxy rules Endpoint changes"}),
		servicesPending: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_service_changes_pending",
			Help: "Pending proxy rules Service changes"}),
		endpointsPending: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_endpoint_changes_pending",
			Help: "Pending proxy rules Endpoint changes"}),
		noLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_no_local_endpoints_total",
			Help: "Number of services with a Local traffic policy and no endpoints"}, []string{"traffic_policy"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.syncDuration, m.fullSyncDuration, m.partialSyncDuration, m.programmingLatency,
		m.lastSync, m.lastQueued, m.servicesPending, m.endpointsPending, m.noLocalEndpoints, m.failures, m.serviceChanges, m.endpointChanges} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering proxy metrics: %w", err)
		}
	}
	return m, nil
}
