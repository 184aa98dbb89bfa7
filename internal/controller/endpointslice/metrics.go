package endpointslice

import (
	"math"

	discovery "k8s.io/api/discovery/v1"

	"github.com/prometheus/client_golang/prometheus"
)

// subsystem is Kubernetes' metric subsystem for this controller, so that
// dashboards written for kube-controller-manager work unchanged.
const subsystem = "endpoint_slice_controller"

// metrics are the controller's Prometheus collectors.
type metrics struct {
	changes          *prometheus.CounterVec
	syncs            *prometheus.CounterVec
	changedPerSync   *prometheus.HistogramVec
	desiredSlices    prometheus.Gauge
	numSlices        prometheus.Gauge
	endpointsDesired prometheus.Gauge
	syncDuration     prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "changes",
			Help: "Number of EndpointSlice changes, by operation (create, update, delete).",
		}, []string{"operation"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "syncs",
			Help: "Number of EndpointSlice syncs, by result (success, error, stale).",
		}, []string{"result"}),
		changedPerSync: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: subsystem, Name: "endpointslices_changed_per_sync",
			Help:    "Number of EndpointSlices changed on each Service sync.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}, []string{"topology", "traffic_distribution"}),
		desiredSlices: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: subsystem, Name: "desired_endpoint_slices",
			Help: "Number of EndpointSlices that would exist with perfect endpoint allocation.",
		}),
		numSlices: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: subsystem, Name: "num_endpoint_slices",
			Help: "Number of EndpointSlices managed by the controller.",
		}),
		endpointsDesired: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: subsystem, Name: "endpoints_desired",
			Help: "Number of endpoints desired across all Services.",
		}),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: subsystem, Name: "sync_duration_seconds",
			Help:    "Duration of one Service sync, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
	}
	if reg != nil {
		reg.MustRegister(m.changes, m.syncs, m.changedPerSync, m.desiredSlices, m.numSlices, m.endpointsDesired, m.syncDuration)
	}
	return m
}

// sliceStats summarises the slices of one Service for the gauges.
type sliceStats struct {
	endpoints, desired, actual int
}

// statsOf computes the stats of the slices a Service has after a sync:
// desired counts, per address type and port set, the slices perfect
// packing would need (an empty set still needs its one placeholder).
func statsOf(slices []*discovery.EndpointSlice, maxPerSlice int) sliceStats {
	type groupKey struct {
		at    discovery.AddressType
		ports string
	}
	counts := map[groupKey]int{}
	var st sliceStats
	for _, s := range slices {
		k := groupKey{s.AddressType, portsKey(s.Ports)}
		counts[k] += len(s.Endpoints)
		st.endpoints += len(s.Endpoints)
		st.actual++
	}
	for _, n := range counts {
		st.desired += max(1, int(math.Ceil(float64(n)/float64(maxPerSlice))))
	}
	return st
}

// finalSlices is what exists once p is applied to the managed slices.
func finalSlices(existing []*discovery.EndpointSlice, p plan) []*discovery.EndpointSlice {
	gone := map[string]bool{}
	for _, s := range p.delete {
		gone[s.Name] = true
	}
	for _, s := range p.update {
		gone[s.Name] = true
	}
	var out []*discovery.EndpointSlice
	for _, s := range existing {
		if s.Labels[discovery.LabelManagedBy] == ControllerName && s.DeletionTimestamp == nil && !gone[s.Name] {
			out = append(out, s)
		}
	}
	out = append(out, p.update...)
	return append(out, p.create...)
}
