package netpol

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the node's NetworkPolicy metrics, served beside the proxy's.
type metrics struct {
	syncDuration        prometheus.Histogram
	programmingDuration prometheus.Histogram
	syncErrors          prometheus.Counter
	connections         *connectionCollector
}

func newMetrics(s *Syncer) *metrics {
	buckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	return &metrics{
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tranche_networkpolicy_sync_duration_seconds",
			Help: "Time one sync of the NetworkPolicy table took (compiling excluded), in seconds", Buckets: buckets}),
		programmingDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tranche_networkpolicy_programming_duration_seconds",
			Help: "Time from a change of a NetworkPolicy, pod or namespace reaching the node to its rules being in the kernel, in seconds", Buckets: buckets}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tranche_networkpolicy_sync_errors_total",
			Help: "Syncs of the NetworkPolicy table that failed"}),
		connections: &connectionCollector{s: s},
	}
}

func (m *metrics) register(reg prometheus.Registerer) {
	reg.MustRegister(m.syncDuration, m.programmingDuration, m.syncErrors, m.connections)
}

var (
	allowedDesc = prometheus.NewDesc("tranche_networkpolicy_allowed_connections_total",
		"New connections a NetworkPolicy rule allowed on this node (first packet only)", []string{"namespace", "policy", "direction"}, nil)
	deniedDesc = prometheus.NewDesc("tranche_networkpolicy_denied_connections_total",
		"New connections dropped on this node because no policy of an isolated pod allowed them", []string{"namespace", "pod", "direction"}, nil)
)

// connectionCollector reads the table's named counters when scraped.
type connectionCollector struct{ s *Syncer }

// Describe implements prometheus.Collector.
func (c *connectionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- allowedDesc
	ch <- deniedDesc
}

// Collect implements prometheus.Collector: one sample per counter the last sync
// wrote (a policy or pod gone is gone from the metrics).
func (c *connectionCollector) Collect(ch chan<- prometheus.Metric) {
	specs := c.s.counters()
	if len(specs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	counters, err := c.s.nft.ListCounters(ctx)
	if err != nil {
		c.s.log.Warn("reading the NetworkPolicy counters", "err", err)
		return
	}
	for _, ctr := range counters {
		spec, ok := specs[ctr.Name]
		if !ok || ctr.Packets == nil {
			continue
		}
		desc := deniedDesc
		if spec.allow {
			desc = allowedDesc
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(*ctr.Packets), spec.namespace, spec.name, string(spec.direction))
	}
}
