package apiserver

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tranche/tranche/internal/storage"
)

// apiserverComponent is the component label of requests served by the API handlers.
const apiserverComponent = "apiserver"

// requestBuckets are kube-apiserver's buckets for request and etcd latencies (seconds).
var requestBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
	4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

// instruments are the API server's request and watch metrics, named and labelled as
// kube-apiserver's (k8s.io/apiserver/pkg/endpoints/metrics).
type instruments struct {
	requests    *prometheus.CounterVec
	latencies   *prometheus.HistogramVec
	watchEvents *prometheus.CounterVec
	// longRunning counts the watches and connections being served.
	longRunning *prometheus.GaugeVec
}

// instrument registers the server's metrics with reg (nil: none) and times its storage
// calls.
func (s *Server) instrument(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	st, err := newInstrumentedStorage(s.cfg.Storage, reg)
	if err != nil {
		return err
	}
	s.cfg.Storage = st
	for _, e := range s.routes.Load().entries {
		e.store.s = st
	}
	s.metrics, err = newInstruments(reg, s)
	return err
}

// newInstruments registers the request metrics and apiserver_storage_objects with reg.
func newInstruments(reg prometheus.Registerer, s *Server) (*instruments, error) {
	m := &instruments{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
		}, []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"}),
		latencies: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
			Buckets: requestBuckets,
		}, []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"}),
		watchEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_watch_events_total",
			Help: "Number of events sent in watch clients",
		}, []string{"group", "version", "resource"}),
		longRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_longrunning_requests",
			Help: "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latencies, m.watchEvents, m.longRunning, &storageObjects{s: s}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// healthPaths are the non-resource paths kube-apiserver counts (with the path as
// subresource and empty scope and component).
var healthPaths = map[string]bool{"/healthz": true, "/livez": true, "/readyz": true}

// requestLabels are the labels of one request, without the code.
type requestLabels struct {
	verb, dryRun, group, version, resource, subresource, scope, component string
}

// labelsFor describes r as kube-apiserver's metrics do; ok is false for requests they
// do not count (non-resource paths other than the health checks).
func labelsFor(r *http.Request, ri *requestInfo) (l requestLabels, ok bool) {
	if !ri.IsResourceRequest {
		if !healthPaths[r.URL.Path] {
			return l, false
		}
		return requestLabels{verb: "GET", subresource: r.URL.Path}, true
	}
	l = requestLabels{group: ri.APIGroup, version: ri.APIVersion, resource: ri.Resource, subresource: ri.Subresource,
		component: apiserverComponent, dryRun: cleanDryRun(r)}
	switch {
	case ri.Name != "" || ri.Verb == "create":
		l.scope = "resource"
	case ri.Namespace != "":
		l.scope = "namespace"
	default:
		l.scope = "cluster"
	}
	l.verb = reportedVerb(r, ri, l.scope)
	return l, true
}

// reportedVerb is kube-apiserver's verb label: the HTTP method, with LIST for a GET of
// a collection, WATCH, APPLY for server-side apply and CONNECT for streaming
// subresources; "other" for anything else.
func reportedVerb(r *http.Request, ri *requestInfo, scope string) string {
	verb := strings.ToUpper(r.Method)
	if (verb == http.MethodGet || verb == http.MethodHead) && scope != "resource" {
		verb = "LIST"
	}
	if ri.Verb == "watch" {
		verb = "WATCH"
	}
	if verb == http.MethodPatch && r.Header.Get("Content-Type") == "application/apply-patch+yaml" {
		verb = "APPLY"
	}
	if longRunningSubresources[ri.Subresource] {
		verb = "CONNECT"
	}
	switch verb {
	case "APPLY", "CONNECT", "DELETE", "GET", "LIST", "PATCH", "POST", "PUT", "WATCH":
		return verb
	}
	return "other"
}

// cleanDryRun is the dry_run label: the request's dryRun values, deduplicated and
// sorted, "invalid" for a value other than All.
func cleanDryRun(r *http.Request) string {
	if !strings.Contains(r.URL.RawQuery, "dryRun") {
		return ""
	}
	vals := r.URL.Query()["dryRun"]
	for _, v := range vals {
		if v != "All" {
			return "invalid"
		}
	}
	slices.Sort(vals)
	return strings.Join(slices.Compact(vals), ",")
}

// track starts measuring one request: it returns the writer to serve it with (which
// records the status code) and the function that records it when it is done.
func (m *instruments) track(w http.ResponseWriter, r *http.Request, ri *requestInfo) (http.ResponseWriter, func()) {
	l, ok := labelsFor(r, ri)
	if !ok {
		return w, func() {}
	}
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	var running prometheus.Gauge
	if l.verb == "WATCH" || l.verb == "CONNECT" {
		running = m.longRunning.WithLabelValues(l.verb, l.group, l.version, l.resource, l.subresource, l.scope, l.component)
		running.Inc()
	}
	return sw, func() {
		if running != nil {
			running.Dec()
		}
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		m.requests.WithLabelValues(l.verb, l.dryRun, l.group, l.version, l.resource, l.subresource, l.scope, l.component, strconv.Itoa(code)).Inc()
		m.latencies.WithLabelValues(l.verb, l.dryRun, l.group, l.version, l.resource, l.subresource, l.scope, l.component).Observe(time.Since(start).Seconds())
	}
}

// watchEvent counts one event sent to a watch of e.
func (m *instruments) watchEvent(e *entry) {
	if m == nil {
		return
	}
	m.watchEvents.WithLabelValues(e.res.GVK.Group, e.res.GVK.Version, e.res.Plural).Inc()
}

// statusWriter remembers the status code of a response. It flushes and hijacks as the
// writer it wraps (watches flush, streaming subresources upgrade).
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes the underlying writer when it can.
func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack takes over the connection as an upgrade does; the request counts as 101.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.code == 0 {
		w.code = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// storageObjects is apiserver_storage_objects: the number of stored objects of each
// resource, counted in storage when scraped (-1 when the count fails).
type storageObjects struct {
	s *Server
}

var storageObjectsDesc = prometheus.NewDesc("apiserver_storage_objects",
	"Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
	[]string{"resource"}, nil)

func (c *storageObjects) Describe(ch chan<- *prometheus.Desc) { ch <- storageObjectsDesc }

func (c *storageObjects) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(c.s.bg, 5*time.Second)
	defer cancel()
	for _, e := range c.s.routes.Load().entries {
		// A view of another resource's objects is counted there (a custom resource's
		// storage version is a view of itself).
		if e.res.Computed || e.res.Storage != nil && e.res.Storage.GVR != e.res.GVR() {
			continue
		}
		n := -1.0
		if res, err := c.s.cfg.Storage.List(ctx, e.store.prefix(""), storage.ListOptions{Limit: 1}); err == nil {
			n = float64(int64(len(res.Items)) + res.RemainingCount)
		}
		ch <- prometheus.MustNewConstMetric(storageObjectsDesc, prometheus.GaugeValue, n, e.store.gr.String())
	}
}
