package ingress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ProxyConfig tunes the reverse proxy.
type ProxyConfig struct {
	Logger *slog.Logger
	// AccessLog logs one structured line per request at Info level, to AccessLogger
	// when set (see NewAccessLogger), else to Logger.
	AccessLog    bool
	AccessLogger *slog.Logger
	// MaxBodyBytes is the largest request body accepted; larger ones get 413.
	MaxBodyBytes int64
	// Attempts is how many endpoints an idempotent request without a body may try when
	// connecting fails (at least 1).
	Attempts int
	// DialTimeout bounds connecting to one endpoint.
	DialTimeout time.Duration
	// Metrics, when set, receives request counts and latencies.
	Metrics *Metrics
}

// Proxy is the http.Handler that routes requests with the current Table.
type Proxy struct {
	cfg   ProxyConfig
	table atomic.Pointer[Table]
	rp    *httputil.ReverseProxy
	// direct keeps the backend connections of both paths.
	direct *directTransport
	// buffers lends both paths the buffers large bodies are copied through.
	buffers *bufferPool
	// children caches the metric children per backend of the current Table and status
	// code: WithLabelValues hashes and looks up its labels under a lock on every call.
	// SetTable empties it, so Backends of old Tables are not kept.
	children sync.Map // childKey → *child
	// clientChecks counts the lean path's checks that a client with a request in
	// flight is still there (abort.go); tests wait on it.
	clientChecks atomic.Uint64
	// access is AccessLogger's handler when NewAccessLogger made it: record writes
	// its lines itself.
	access *accessHandler
}

type childKey struct {
	backend *Backend // nil: no backend (404)
	status  int
}

type child struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// NewProxy returns a Proxy with an empty Table (every request gets 404 until SetTable).
func NewProxy(cfg ProxyConfig) *Proxy {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.AccessLogger == nil {
		cfg.AccessLogger = cfg.Logger
	}
	if cfg.Attempts < 1 {
		cfg.Attempts = 1
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	p := &Proxy{cfg: cfg}
	p.access, _ = cfg.AccessLogger.Handler().(*accessHandler)
	p.table.Store(Build(NewFake()))
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		DialContext:         dialer.DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		// Pass Accept-Encoding as the client sent it: the transport must not ask for gzip
		// on its own and then decompress what the client may have wanted compressed.
		DisableCompression: true,
	}
	p.buffers = &bufferPool{}
	p.direct = &directTransport{dial: dialer.DialContext, fallback: transport, maxIdle: 256, idleTime: 60 * time.Second}
	p.rp = &httputil.ReverseProxy{
		Rewrite:      rewrite,
		Transport:    &retryTransport{attempts: cfg.Attempts, base: p.direct},
		ErrorHandler: p.proxyError,
		ErrorLog:     slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		BufferPool:   p.buffers,
	}
	return p
}

// SetTable replaces the routing table; requests in flight keep the one they started with.
func (p *Proxy) SetTable(t *Table) {
	p.table.Store(t)
	p.children.Clear()
}

// metrics returns the metric children for an answer of status from be (nil: none).
func (p *Proxy) metrics(m *Metrics, ingress string, be *Backend, status int) *child {
	k := childKey{backend: be, status: status}
	if c, ok := p.children.Load(k); ok {
		return c.(*child)
	}
	backend := "-"
	if be != nil {
		backend = be.Name()
	}
	c := &child{requests: m.requests.WithLabelValues(ingress, strconv.Itoa(status), backend), latency: m.latency.WithLabelValues(ingress)}
	p.children.Store(k, c)
	return c
}

// Table returns the current routing table.
func (p *Proxy) Table() *Table { return p.table.Load() }

// GetCertificate serves tls.Config.GetCertificate: the Secret's certificate for the SNI
// name, else fallback.
func (p *Proxy) GetCertificate(fallback *tls.Certificate) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if c := p.table.Load().Certificate(hello.ServerName); c != nil {
			return c, nil
		}
		return fallback, nil
	}
}

type ctxKey struct{}

// attempt is the per-request state the transport and error handler share.
type attempt struct {
	backend  *Backend
	endpoint string // last endpoint tried
	status   int
}

func rewrite(pr *httputil.ProxyRequest) {
	st := pr.In.Context().Value(ctxKey{}).(*attempt)
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = st.endpoint
	// Keep what earlier proxies recorded; SetXForwarded appends the client's address.
	pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
	pr.SetXForwarded()
	if pr.In.TLS == nil && pr.In.Context().Value(tlsConnKey{}) != nil {
		// A TLS connection the lean path handed over: net/http sees a plain one.
		pr.Out.Header.Set("X-Forwarded-Proto", "https")
	}
	pr.Out.Host = pr.In.Host
}

// tlsConnKey marks the context of a request that came over TLS on a connection the lean
// path handed to net/http.
type tlsConnKey struct{}

// route finds the backend for a request with this Host header and path: ingress is
// the namespace/name of the Ingress that named it ("" when none), be nil when nothing
// matches and no Ingress has a default backend.
func (p *Proxy) route(tab *Table, hostHeader, path string) (ingress string, be *Backend) {
	if rt := tab.Route(routeHost(hostHeader), path); rt != nil {
		return rt.Ingress, rt.Backend
	}
	if be = tab.Default(); be != nil {
		return be.Ingress, be
	}
	return "", nil
}

// routeHost is the Host header without its port. It leaves a host without one alone
// without calling net.SplitHostPort, whose error for it would be an allocation per request.
func routeHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		if host, _, err := net.SplitHostPort(h); err == nil {
			return host
		}
	}
	return h
}

// exchange is what the metrics and the access log say about one answered request.
type exchange struct {
	start                             time.Time
	client, method, host, path, proto string
	ingress                           string
	backend                           *Backend
	endpoint                          string
	status                            int
	bytes                             int64
}

// record counts an answered request in the metrics and writes its access line.
func (p *Proxy) record(ctx context.Context, x *exchange) {
	if p.cfg.Metrics == nil && !p.cfg.AccessLog {
		// Nothing to record: not even the clock is read.
		return
	}
	now := time.Now()
	elapsed := now.Sub(x.start)
	ingress := x.ingress
	if ingress == "" {
		ingress = "-"
	}
	if m := p.cfg.Metrics; m != nil {
		c := p.metrics(m, ingress, x.backend, x.status)
		c.requests.Inc()
		c.latency.Observe(elapsed.Seconds())
	}
	if !p.cfg.AccessLog {
		return
	}
	backend := "-"
	if x.backend != nil {
		backend = x.backend.Name()
	}
	if h := p.access; h != nil {
		if h.Enabled(ctx, slog.LevelInfo) {
			h.writeAccess(now, x, elapsed, ingress, backend)
		}
		return
	}
	p.cfg.AccessLogger.LogAttrs(ctx, slog.LevelInfo, "request",
		slog.String("client", x.client), slog.String("method", x.method), slog.String("host", x.host),
		slog.String("path", x.path), slog.String("proto", x.proto), slog.Int("status", x.status),
		slog.Int64("bytes", x.bytes), slog.Duration("duration", elapsed), slog.String("ingress", ingress),
		slog.String("backend", backend), slog.String("endpoint", x.endpoint))
}

// ServeHTTP is the general path: every request net/http serves (HTTP/2, protocol
// upgrades, Expect: 100-continue, and whatever the lean path of Serve hands over).
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ingress, be := p.route(p.table.Load(), r.Host, r.URL.Path)
	rec := &recorder{ResponseWriter: w}
	st := &attempt{backend: be}
	switch {
	case be == nil:
		writePage(rec, http.StatusNotFound, notFound(r.Host, r.URL.Path))
	case be.Missing != "":
		writePage(rec, http.StatusServiceUnavailable, "backend unavailable: "+be.Missing)
	case r.ContentLength > p.cfg.MaxBodyBytes && p.cfg.MaxBodyBytes > 0:
		writePage(rec, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes exceeds the limit of %d", r.ContentLength, p.cfg.MaxBodyBytes))
	default:
		st.endpoint = be.Pick()
		if st.endpoint == "" {
			writePage(rec, http.StatusServiceUnavailable, "backend "+be.Name()+" has no ready endpoint")
			break
		}
		// The server gives a request without a body http.NoBody: nothing to limit.
		if p.cfg.MaxBodyBytes > 0 && r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(rec, r.Body, p.cfg.MaxBodyBytes)
		}
		p.rp.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), ctxKey{}, st)))
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	p.record(r.Context(), &exchange{start: start, client: r.RemoteAddr, method: r.Method, host: r.Host, path: r.URL.Path,
		proto: r.Proto, ingress: ingress, backend: be, endpoint: st.endpoint, status: rec.status, bytes: rec.bytes})
}

// notFound is the message of the 404 page.
func notFound(hostHeader, path string) string {
	return "no Ingress rule matches host " + strconv.Quote(routeHost(hostHeader)) + " and path " + strconv.Quote(path) + ", and no Ingress has a default backend"
}

func (p *Proxy) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writePage(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds the limit of %d bytes", tooBig.Limit))
	case errors.Is(err, context.Canceled):
		// The client went away (net/http's server cancels the request when it reads
		// EOF); nobody reads the answer, which is logged and counted as nginx's 499.
		w.WriteHeader(statusClientClosed)
	default:
		st := r.Context().Value(ctxKey{}).(*attempt)
		p.cfg.Logger.Warn("backend failed", "backend", st.backend.Name(), "endpoint", st.endpoint, "err", err)
		writePage(w, http.StatusBadGateway, "backend "+st.backend.Name()+" failed")
	}
}

// writePage answers with one of our own small HTML pages.
func writePage(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, pageBody(code, msg))
}

// pageBody is the HTML of one of our pages.
func pageBody(code int, msg string) string {
	text := strconv.Itoa(code) + " " + http.StatusText(code)
	return "<!DOCTYPE html>\n<html><head><title>" + text + "</title></head><body><h1>" + text + "</h1><p>" +
		html.EscapeString(msg) + "</p><hr><p>tranche ingress</p></body></html>\n"
}

// retryTransport retries idempotent requests without a body on another endpoint when
// connecting fails or the connection breaks before the answer's head (nginx's
// proxy_next_upstream error): an idempotent request may be sent again (RFC 9110 9.2.2).
type retryTransport struct {
	base     http.RoundTripper
	attempts int
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	st, _ := req.Context().Value(ctxKey{}).(*attempt)
	var tried []string
	for {
		tried = append(tried, req.URL.Host)
		resp, err := t.base.RoundTrip(req)
		if err == nil || st == nil || len(tried) >= t.attempts || !retryable(req, err) {
			return resp, err
		}
		next := st.backend.PickOther(tried)
		if next == "" {
			return resp, err
		}
		st.endpoint = next
		req = req.Clone(req.Context())
		req.URL.Host = next
	}
}

func retryable(req *http.Request, err error) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	if req.Body != nil && req.Body != http.NoBody {
		return false
	}
	if req.Context().Err() != nil {
		return false // the client left
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// recorder remembers the status and size of the answer; Unwrap lets
// http.ResponseController reach Flush and Hijack (streaming, WebSocket).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() { _ = http.NewResponseController(r.ResponseWriter).Flush() }

// Hijack is how the reverse proxy takes over a connection for a protocol switch
// (WebSocket); the 101 goes out on the hijacked connection, so it is recorded here.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	r.status = http.StatusSwitchingProtocols
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// bufferPool reuses the copy buffers of response bodies; without one the reverse proxy
// allocates 32 kB per request, which the garbage collector then pays for.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// Metrics are the proxy's Prometheus collectors.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics creates the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tranche_ingress_requests_total",
			Help: "HTTP requests answered, by Ingress (namespace/name), status code and backend (namespace/service:port).",
		}, []string{"ingress", "code", "backend"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tranche_ingress_request_duration_seconds",
			Help:    "Time from receiving a request to the end of its answer, by Ingress.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"ingress"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}
