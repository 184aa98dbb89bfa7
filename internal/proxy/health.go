package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultHealthTimeout is how long a change may wait for a sync before the node's proxy
// reports itself unhealthy: upstream's two sync periods of 30 s.
const DefaultHealthTimeout = 60 * time.Second

// SyncRecorder is told when a change is queued and when the table was synced, which is
// what the proxy's health depends on.
type SyncRecorder interface {
	QueuedUpdate()
	Updated()
}

// HealthServer answers the node's proxy health checks, /healthz and /livez (kube-proxy's
// port 10256), with upstream's staleness rule: the proxy is healthy unless a change has
// waited for a sync longer than the timeout. /healthz also answers 503 while the node is
// being deleted, so that load balancers drain it first. Safe for concurrent use.
type HealthServer struct {
	timeout time.Duration
	now     func() time.Time

	mu            sync.Mutex
	lastUpdated   time.Time
	oldestPending time.Time
	nodeEligible  bool
}

var _ SyncRecorder = (*HealthServer)(nil)

// NewHealthServer returns a health server with the given staleness timeout (0: the
// default) and clock (nil: time.Now). It counts a first sync as pending.
func NewHealthServer(timeout time.Duration, now func() time.Time) *HealthServer {
	if timeout <= 0 {
		timeout = DefaultHealthTimeout
	}
	if now == nil {
		now = time.Now
	}
	return &HealthServer{timeout: timeout, now: now, oldestPending: now(), nodeEligible: true}
}

// QueuedUpdate records that a change waits for a sync (the oldest pending one counts).
func (h *HealthServer) QueuedUpdate() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.oldestPending.IsZero() {
		h.oldestPending = h.now()
	}
}

// Updated records a successful sync of everything queued so far.
func (h *HealthServer) Updated() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastUpdated = h.now()
	h.oldestPending = time.Time{}
}

// SetNodeEligible records whether the node may receive traffic (false while it is being
// deleted).
func (h *HealthServer) SetNodeEligible(ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nodeEligible = ok
}

// Healthy reports whether no change has waited longer than the timeout.
func (h *HealthServer) Healthy() bool {
	ok, _, _, _ := h.state()
	return ok
}

func (h *HealthServer) state() (healthy bool, lastUpdated, now time.Time, eligible bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now = h.now()
	healthy = h.oldestPending.IsZero() || now.Sub(h.oldestPending) <= h.timeout
	return healthy, h.lastUpdated, now, h.nodeEligible
}

// ServeHTTP answers /healthz and /livez.
func (h *HealthServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	healthy, last, now, eligible := h.state()
	body := map[string]any{"lastUpdated": last.Format(time.RFC3339Nano), "currentTime": now.Format(time.RFC3339Nano)}
	ok := healthy
	switch r.URL.Path {
	case "/healthz":
		body["nodeEligible"] = eligible
		ok = healthy && eligible
	case "/livez":
	default:
		http.NotFound(w, r)
		return
	}
	writeJSON(w, ok, body)
}

func writeJSON(w http.ResponseWriter, ok bool, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if ok {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// ServiceHealth is what a service's health check port says on this node.
type ServiceHealth struct {
	// Port is the service's healthCheckNodePort.
	Port int32
	// LocalEndpoints counts this node's ready endpoints of the service.
	LocalEndpoints int
}

// ServiceHealthServer serves the healthCheckNodePort of every service with
// externalTrafficPolicy Local: 200 with the count of local endpoints when the node has
// some, 503 otherwise (or when the proxy itself is unhealthy), so that an external load
// balancer sends traffic only to nodes that can serve it. Safe for concurrent use.
type ServiceHealthServer struct {
	listen  func(port int32) (net.Listener, error)
	healthy func() bool
	log     *slog.Logger

	mu       sync.Mutex
	services map[types.NamespacedName]*healthListener
}

type healthListener struct {
	port   int32
	server *http.Server
	count  int
}

// NewServiceHealthServer returns a server that opens its ports with listen (nil: TCP on
// every address of the current network namespace) and asks healthy (nil: always) about
// the proxy itself.
func NewServiceHealthServer(listen func(port int32) (net.Listener, error), healthy func() bool, log *slog.Logger) *ServiceHealthServer {
	if listen == nil {
		listen = func(port int32) (net.Listener, error) {
			return net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(int(port))))
		}
	}
	if healthy == nil {
		healthy = func() bool { return true }
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ServiceHealthServer{listen: listen, healthy: healthy, log: log, services: map[types.NamespacedName]*healthListener{}}
}

// Sync makes the server answer for exactly the services of want: it closes the ports of
// services no longer there, opens new ones and updates endpoint counts. A port that
// cannot be opened is reported and retried by the next Sync.
func (s *ServiceHealthServer) Sync(want map[types.NamespacedName]ServiceHealth) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, l := range s.services {
		if w, ok := want[n]; !ok || w.Port != l.port {
			_ = l.server.Close()
			delete(s.services, n)
		}
	}
	var errs []error
	for n, w := range want {
		if l, ok := s.services[n]; ok {
			l.count = w.LocalEndpoints
			continue
		}
		ln, err := s.listen(w.Port)
		if err != nil {
			errs = append(errs, fmt.Errorf("service %s: health check node port %d: %w", n, w.Port, err))
			continue
		}
		l := &healthListener{port: w.Port, count: w.LocalEndpoints}
		l.server = &http.Server{Handler: s.handler(n), ReadHeaderTimeout: 5 * time.Second}
		s.services[n] = l
		go func() {
			if err := l.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Warn("health check node port stopped", "service", n.String(), "port", w.Port, "err", err)
			}
		}()
	}
	return errors.Join(errs...)
}

// Ports returns the services served and their ports, for tests and diagnosis.
func (s *ServiceHealthServer) Ports() map[types.NamespacedName]int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[types.NamespacedName]int32, len(s.services))
	for n, l := range s.services {
		out[n] = l.port
	}
	return out
}

func (s *ServiceHealthServer) handler(n types.NamespacedName) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		count := 0
		if l, ok := s.services[n]; ok {
			count = l.count
		}
		s.mu.Unlock()
		healthy := s.healthy()
		writeJSON(w, healthy && count > 0, map[string]any{
			"service":             map[string]string{"namespace": n.Namespace, "name": n.Name},
			"localEndpoints":      count,
			"serviceProxyHealthy": healthy,
		})
	})
}

// Close stops every port.
func (s *ServiceHealthServer) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, l := range s.services {
		_ = l.server.Close()
		delete(s.services, n)
	}
}

// serveUntilDone serves h on ln until ctx ends.
func serveUntilDone(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, what string) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("proxy "+what+" server stopped", "address", ln.Addr().String(), "err", err)
	}
}

// cloneHealth copies a health map for handing to another goroutine.
func cloneHealth(m map[types.NamespacedName]ServiceHealth) map[types.NamespacedName]ServiceHealth {
	return maps.Clone(m)
}
