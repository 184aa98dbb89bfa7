package server

import (
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/tranche/tranche/internal/apiserver"
)

// newMetricsRegistry makes the API server's registry with the go_* and process_*
// collectors kube-apiserver serves.
func newMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// observability serves /metrics and /debug/pprof/* in front of the API handler, each
// authorized as a non-resource "get" of its path (the API handler serves the rest).
// RBAC decides who reads them: system:monitoring and cluster-admin for /metrics, only
// roles with a wildcard non-resource rule (cluster-admin) for /debug/pprof/, as
// kube-apiserver with its default --profiling=true.
type observability struct {
	guard   apiserver.Guard
	api     http.Handler
	metrics http.Handler
	pprof   *http.ServeMux
}

func newObservability(guard apiserver.Guard, api http.Handler, reg *prometheus.Registry) *observability {
	p := http.NewServeMux()
	p.HandleFunc("/debug/pprof/", pprof.Index)
	p.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	p.HandleFunc("/debug/pprof/profile", pprof.Profile)
	p.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	p.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return &observability{guard: guard, api: api, pprof: p,
		metrics: promhttp.HandlerFor(withWorkqueueFamilies(reg), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})}
}

// withWorkqueueFamilies gathers reg and the workqueue_* families of component-base's
// legacy registry. Importing k8s.io/apiserver/pkg/endpoints (the CRD OpenAPI builder
// does) links k8s.io/component-base/metrics/prometheus/workqueue, whose init claims
// client-go's once-per-process workqueue.SetProvider before Run's call: the queues then
// count in that registry, not in workqueueMetrics. Only one provider ever has queues,
// and a metric vector without children is not exported, so the two never both report
// a family.
func withWorkqueueFamilies(reg *prometheus.Registry) prometheus.Gatherer {
	legacy := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := legacyregistry.DefaultGatherer.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "workqueue_") {
				out = append(out, mf)
			}
		}
		return out, err
	})
	return prometheus.Gatherers{reg, legacy}
}

func (o *observability) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var h http.Handler
	switch p := r.URL.Path; {
	case p == "/metrics":
		h = o.metrics
	case p == "/debug/pprof" || strings.HasPrefix(p, "/debug/pprof/"):
		h = o.pprof
		if p == "/debug/pprof" {
			h = http.RedirectHandler("/debug/pprof/", http.StatusMovedPermanently)
		}
	default:
		o.api.ServeHTTP(w, r)
		return
	}
	if o.guard != nil {
		nr, err := o.guard.Check(r, apiserver.Request{Verb: strings.ToLower(r.Method), Path: r.URL.Path})
		if err != nil {
			apiserver.WriteError(w, err)
			return
		}
		r = nr
	}
	h.ServeHTTP(w, r)
}

// workqueueMetrics are client-go work queues' metrics as kube-controller-manager
// serves them (k8s.io/component-base/metrics/prometheus/workqueue): workqueue_depth,
// workqueue_adds_total, ..., labelled by queue name. Queues take it from
// workqueue.SetProvider, which client-go honours once per process: a second server in
// the same process reports its queues on the first one's registry.
type workqueueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, work              *prometheus.HistogramVec
}

var _ workqueue.MetricsProvider = (*workqueueMetrics)(nil)

func newWorkqueueMetrics(reg prometheus.Registerer) *workqueueMetrics {
	name := []string{"name"}
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 10)
	m := &workqueueMetrics{
		depth:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "Current depth of workqueue"}, name),
		adds:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Total number of adds handled by workqueue"}, name),
		latency:    prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_queue_duration_seconds", Help: "How long in seconds an item stays in workqueue before being requested.", Buckets: buckets}, name),
		work:       prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_work_duration_seconds", Help: "How long in seconds processing an item from workqueue takes.", Buckets: buckets}, name),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_unfinished_work_seconds", Help: "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases."}, name),
		longest:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_longest_running_processor_seconds", Help: "How many seconds has the longest running processor for workqueue been running."}, name),
		retries:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total", Help: "Total number of retries handled by workqueue"}, name),
	}
	reg.MustRegister(m.depth, m.adds, m.latency, m.work, m.unfinished, m.longest, m.retries)
	return m
}

func (m *workqueueMetrics) NewDepthMetric(n string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(n)
}

func (m *workqueueMetrics) NewAddsMetric(n string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(n)
}

func (m *workqueueMetrics) NewLatencyMetric(n string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(n)
}

func (m *workqueueMetrics) NewWorkDurationMetric(n string) workqueue.HistogramMetric {
	return m.work.WithLabelValues(n)
}

func (m *workqueueMetrics) NewUnfinishedWorkSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(n)
}

func (m *workqueueMetrics) NewLongestRunningProcessorSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return m.longest.WithLabelValues(n)
}

func (m *workqueueMetrics) NewRetriesMetric(n string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(n)
}
