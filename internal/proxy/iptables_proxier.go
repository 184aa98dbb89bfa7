package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// IPTablesProxier is the iptables proxy mode: the same change trackers and endpoint
// selection as the nftables Proxier, written as kube-proxy's iptables rules with one
// iptables-restore per sync. Event handlers only record changes and wake the runner;
// Sync applies them. Safe for concurrent use.
type IPTablesProxier struct {
	proxierCore
	ipt  IPTables
	iptm *iptMetrics

	// guarded by mu:
	st *iptState
	syncState
}

// iptMetrics are kube-proxy's iptables-mode metrics.
type iptMetrics struct {
	restoreFailures, partialRestoreFailures prometheus.Counter
	rulesTotal, rulesLast                   *prometheus.GaugeVec
}

// NewIPTablesProxier returns an IPTablesProxier writing through ipt, which the caller
// creates inside the node's network namespace.
func NewIPTablesProxier(ipt IPTables, cfg ProxierConfig) (*IPTablesProxier, error) {
	if ipt == nil {
		return nil, errors.New("proxy: nil iptables interface")
	}
	if !cfg.ClusterCIDR.IsValid() || !cfg.ServiceCIDR.IsValid() {
		return nil, fmt.Errorf("proxy: node %q: cluster CIDR %v and service CIDR %v must both be set", cfg.NodeName, cfg.ClusterCIDR, cfg.ServiceCIDR)
	}
	cfg = withDefaults(cfg)
	m, err := newMetrics(nil)
	if err != nil {
		return nil, err
	}
	im := &iptMetrics{
		restoreFailures: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_iptables_restore_failures_total",
			Help: "Cumulative proxy iptables restore failures"}),
		partialRestoreFailures: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_iptables_partial_restore_failures_total",
			Help: "Cumulative proxy iptables partial restore failures"}),
		rulesTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_iptables_total",
			Help: "Total number of iptables rules owned by kube-proxy"}, []string{"table"}),
		rulesLast: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "kubeproxy", Name: "sync_proxy_rules_iptables_last",
			Help: "Number of iptables rules written by kube-proxy in last sync"}, []string{"table"}),
	}
	if reg := cfg.Registerer; reg != nil {
		for _, c := range []prometheus.Collector{m.syncDuration, m.fullSyncDuration, m.partialSyncDuration, m.programmingLatency,
			m.lastSync, m.lastQueued, m.servicesPending, m.endpointsPending, m.noLocalEndpoints, m.serviceChanges, m.endpointChanges,
			im.restoreFailures, im.partialRestoreFailures, im.rulesTotal, im.rulesLast} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("proxy: node %q: registering proxy metrics: %w", cfg.NodeName, err)
			}
		}
	}
	return &IPTablesProxier{
		proxierCore: newProxierCore(cfg, m), ipt: ipt, iptm: im, st: newIPTState(),
		syncState: newSyncState(),
	}, nil
}

// Run syncs whenever changes arrive, at most once per MinSyncPeriod, fully every
// FullSyncPeriod, and again after RetryPeriod (fully) when a sync fails. It returns
// when ctx is cancelled.
func (p *IPTablesProxier) Run(ctx context.Context) { p.runLoop(ctx, "iptables", p.Sync, nil) }

// Sync writes pending changes with one iptables-restore: the top-level chains and the
// changed services' own chains, or everything when the previous sync failed, none has
// run yet, or a full sync is due. A full sync also reads the tables back to delete
// leftover service chains and to insert missing jumps from the built-in chains. Any
// failure makes the next Sync full; the restore input is all or nothing, so a failure
// never leaves a service half-written.
func (p *IPTablesProxier) Sync(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	start, changed, triggers, full := p.beginSync()
	var existing []string
	var jumps []iptJump
	if full {
		saved := map[string][]byte{}
		for _, table := range []string{"filter", "nat"} {
			out, err := p.ipt.Save(ctx, table)
			if err != nil {
				p.needFull = true
				p.iptm.restoreFailures.Inc()
				return fmt.Errorf("node %q: %w", p.cfg.NodeName, err)
			}
			saved[table] = out
		}
		existing = savedChains(saved["nat"])
		jumps = missingJumps(saved)
		changed = changed.Union(p.svcs.Names()).Union(sets.KeySet(p.st.services))
		p.st = newIPTState()
	}
	desired := make(map[types.NamespacedName]*iptServiceRules, changed.Len())
	previous := make(map[types.NamespacedName]*iptServiceRules, changed.Len())
	for n := range changed {
		desired[n] = buildIPTService(p.cfg.Config, p.svcs.Ports(n), p.eps.Endpoints(n))
		previous[n] = p.st.services[n]
	}
	p.metrics.servicesPending.Set(float64(p.svcs.PendingCount()))
	p.metrics.endpointsPending.Set(float64(p.eps.PendingCount()))
	pl := planIPTables(p.cfg.Config, p.st, desired, full, existing, jumps)
	var refused map[types.NamespacedName]error
	if err := p.ipt.Restore(ctx, pl.data); err != nil {
		p.iptm.restoreFailures.Inc()
		if !full {
			p.iptm.partialRestoreFailures.Inc()
		}
		if full {
			var st *iptState
			if st, pl, refused, err = p.isolate(ctx, desired, existing, jumps, err); err == nil {
				p.st = st
			}
		}
		if err != nil {
			// The in-memory copy no longer matches the kernel: start again from scratch.
			p.st = newIPTState()
			p.needFull = true
			return fmt.Errorf("node %q: restoring iptables rules for %d services: %w", p.cfg.NodeName, len(desired), err)
		}
	}
	for n := range p.rejected {
		if _, still := refused[n]; changed.Has(n) && !still {
			p.rejected.Delete(n)
		}
	}
	for _, n := range slices.SortedFunc(maps.Keys(refused), compareNames) {
		p.rejected.Insert(n)
		desired[n] = &iptServiceRules{} // what the tables now hold for it
		p.reportRejected(n, refused[n])
	}
	p.iptm.rulesLast.WithLabelValues("filter").Set(float64(pl.filterRules))
	p.iptm.rulesLast.WithLabelValues("nat").Set(float64(pl.natRules))
	p.iptm.rulesTotal.WithLabelValues("filter").Set(float64(pl.filterRules))
	p.iptm.rulesTotal.WithLabelValues("nat").Set(float64(p.st.natRuleCount()))
	elapsed := p.finishSync(start, full, triggers)
	afterSync(&p.proxierCore, &p.syncState, desired, previous)
	p.cfg.Logger.Debug("synced iptables proxy rules", "node", p.cfg.NodeName, "full", full, "services", len(desired),
		"natChainsWritten", pl.natChainsWritten, "chainsDeleted", pl.chainsDeleted, "seconds", elapsed)
	return nil
}

// natRuleCount counts the nat rules the state holds (top-level and own chains), plus
// the five fixed ones (KUBE-POSTROUTING's three, KUBE-MARK-MASQ's, the jump to
// KUBE-NODEPORTS), for sync_proxy_rules_iptables_total.
func (s *iptState) natRuleCount() int {
	n := 5
	for _, r := range s.services {
		n += len(r.natServices) + len(r.natNodePorts)
		for _, rules := range r.chains {
			n += len(rules)
		}
	}
	return n
}

// isolate finds, after iptables-restore refused a full sync, the services it refuses,
// with `iptables-restore --test` (nothing is written): first the fixed chains alone
// (refused too, no service is to blame and the sync fails), then groups of services on
// top of those accepted so far, a refused group halved down to single services, which
// are left out. Services refused before are checked last, so that the others pass in
// one check. It then restores the full sync without the refused services and returns
// the state, the plan restored and the refused services with iptables-restore's error.
// --test finds what iptables-restore refuses itself (syntax, an extension it cannot
// load); a refusal only the kernel makes passes it, and the sync then fails as a whole
// and is retried in full.
func (p *IPTablesProxier) isolate(ctx context.Context, desired map[types.NamespacedName]*iptServiceRules,
	existing []string, jumps []iptJump, cause error) (*iptState, *iptPlan, map[types.NamespacedName]error, error) {
	accepted := map[types.NamespacedName]*iptServiceRules{}
	plan := func(extra []types.NamespacedName) (*iptState, *iptPlan) {
		set := maps.Clone(accepted)
		for _, n := range extra {
			set[n] = desired[n]
		}
		st := newIPTState()
		return st, planIPTables(p.cfg.Config, st, set, true, existing, jumps)
	}
	if _, pl := plan(nil); p.ipt.Check(ctx, pl.data) != nil {
		return nil, nil, nil, cause
	}
	var fresh, suspects []types.NamespacedName
	for _, n := range slices.SortedFunc(maps.Keys(desired), compareNames) {
		if p.rejected.Has(n) {
			suspects = append(suspects, n)
		} else {
			fresh = append(fresh, n)
		}
	}
	refused := map[types.NamespacedName]error{}
	queue := [][]types.NamespacedName{}
	for _, g := range [][]types.NamespacedName{fresh, suspects} {
		if len(g) > 0 {
			queue = append(queue, g)
		}
	}
	for len(queue) > 0 {
		g := queue[0]
		queue = queue[1:]
		_, pl := plan(g)
		err := p.ipt.Check(ctx, pl.data)
		switch {
		case err == nil:
			for _, n := range g {
				accepted[n] = desired[n]
			}
		case len(g) == 1:
			refused[g[0]] = err
			accepted[g[0]] = &iptServiceRules{}
		default:
			queue = append([][]types.NamespacedName{g[:len(g)/2], g[len(g)/2:]}, queue...)
		}
	}
	st, pl := plan(nil)
	if err := p.ipt.Restore(ctx, pl.data); err != nil {
		return nil, nil, nil, err
	}
	return st, pl, refused, nil
}

// reportRejected tells that iptables-restore refused a service's rules and that they
// were left out: a Warning Event on the Service and one log line.
func (p *IPTablesProxier) reportRejected(n types.NamespacedName, err error) {
	p.cfg.Logger.Warn("iptables-restore refused a service's rules: the service is not programmed until it changes or the next full sync",
		"node", p.cfg.NodeName, "service", n.String(), "err", err)
	if p.cfg.Recorder == nil {
		return
	}
	msg := err.Error()
	if len(msg) > maxErrorInEvent {
		msg = strings.ToValidUTF8(msg[:maxErrorInEvent], "") + " [...]"
	}
	p.cfg.Recorder.Eventf(p.svcs.Ref(n), v1.EventTypeWarning, ReasonRulesRejected,
		"iptables-restore on node %s refused this Service's rules, so that node does not proxy it until it changes or the next full sync (every other Service stays programmed): %s",
		p.cfg.NodeName, msg)
}
