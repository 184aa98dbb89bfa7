package server

import (
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
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
// legacy registry: client-go work queues' metrics as kube-controller-manager serves them
// (workqueue_depth, workqueue_adds_total, ..., labelled by queue name). The binary links
// k8s.io/component-base/metrics/prometheus/workqueue (through k8s.io/apiserver's
// endpoints, which the CRD OpenAPI builder imports), whose init makes it client-go's
// once-per-process workqueue provider; every server in a process reports every queue.
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
	r, ok := authorizeNonResource(o.guard, w, r)
	if !ok {
		return
	}
	h.ServeHTTP(w, r)
}

// authorizeNonResource authenticates and authorizes a request for a non-resource path
// the server's front handlers serve themselves (/metrics, /debug/pprof, OIDC
// discovery) as the API server would: on refusal it writes the Status and reports
// false; a nil guard (tests) lets everything through.
func authorizeNonResource(guard apiserver.Guard, w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if guard == nil {
		return r, true
	}
	nr, err := guard.Check(r, apiserver.Request{Verb: strings.ToLower(r.Method), Path: r.URL.Path})
	if err != nil {
		apiserver.WriteError(w, err)
		return nil, false
	}
	return nr, true
}
