// Package apiserver serves the Kubernetes API over the storage interface: discovery,
// OpenAPI, CRUD, patch, watch, tables and subresources for every registry.Resource.
package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/storage"
)

// KubernetesVersion is the Kubernetes API level the server implements (that of the
// k8s.io/api types it serves).
var KubernetesVersion = version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2", GitCommit: "tranche", GitTreeState: "clean", BuildDate: "2026-12-01T00:00:00Z", Compiler: "gc", Platform: runtime.GOOS + "/" + runtime.GOARCH}

// Config is what the handler needs.
type Config struct {
	Storage   storage.Interface
	Resources []registry.Resource
	Logger    *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Admitters complete writes that need more than the object (allocations).
	Admitters []Admitter
	// Mutators complete writes before the resource's strategy runs (default
	// tolerations), in order.
	Mutators []Mutator
	// Validators check writes after the Admitters (Pod Security), in order.
	Validators []Validator
	// Guard authenticates and authorizes requests; nil lets everything through (tests).
	Guard Guard
	// Aggregated proxies the group versions extension API servers serve; nil: none.
	Aggregated Aggregated
	// OpenAPI serves /openapi/v2 and /openapi/v3; nil means 404.
	OpenAPI http.Handler
	// Extra handles subresources that need more than the registry can give
	// (serviceaccounts/token signs with the server's key) and collections served by
	// code outside the API server (reviews), keyed "resource/subresource" with the
	// group prefix for non-core groups, or by the plural alone. It takes precedence
	// over the resource's registry.Handlers.
	Extra map[string]SubresourceHandler
	// Computed serves the resources marked registry.Resource.Computed (never stored),
	// keyed by group/version/resource: the handler gets every request for the resource
	// with a served verb, after the Guard; a computed resource without a handler answers
	// 503.
	Computed map[schema.GroupVersionResource]SubresourceHandler
	// Ready reports readiness for /readyz; nil means always ready.
	Ready func() error
	// Nodes reaches node agents and pods for logs, exec, attach, port-forward and
	// proxy; nil makes those subresources answer 503.
	Nodes *Nodes
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight bound the read-only and the
	// mutating requests served at once, long-running ones excepted (kube-apiserver's
	// --max-requests-inflight and --max-mutating-requests-inflight); 0 means no limit.
	MaxRequestsInFlight, MaxMutatingRequestsInFlight int
	// RequestTimeout bounds every request that is not long-running (kube-apiserver's
	// --request-timeout); past it the answer is 504 Timeout. 0 means no bound.
	RequestTimeout time.Duration
	// InFlightExempt reports requests served even over those limits (system:masters);
	// nil exempts none.
	InFlightExempt func(*http.Request) bool
	// Metrics registers the API server's metrics; nil means none.
	Metrics prometheus.Registerer
}

// SubresourceHandler serves one extra subresource.
type SubresourceHandler func(ctx context.Context, w http.ResponseWriter, r *http.Request, req Request) error

// Request describes a resource request to guards and extra handlers.
type Request struct {
	Verb, APIGroup, APIVersion, Namespace, Resource, Subresource, Name, Path string
	IsResourceRequest                                                        bool
}

// Guard authenticates and authorizes a request, returning the request to serve (with
// the user in its context) or an error Status (401, 403).
type Guard interface {
	Check(r *http.Request, req Request) (*http.Request, error)
}

// Server is the API handler.
type Server struct {
	cfg        Config
	log        *slog.Logger
	admitters  []Admitter
	validators []Validator
	// namespaces answers the namespace check of every namespaced create.
	namespaces *namespaceCache
	// bg bounds the background storage watches of the caches; Close cancels it.
	bg     context.Context
	stopBG context.CancelFunc
	// streams carry streaming and proxy subresources (nil without Config.Nodes).
	streams *streamTransports
	// inflight bounds the requests served at once (limits.go).
	inflight *inFlight
	// metrics records requests and watch events (nil without Config.Metrics).
	metrics *instruments
	// health serves /healthz, /livez and /readyz.
	health http.Handler
	// fields records managedFields and serves server-side apply (managedfields.go).
	fields fieldManagers
	// routes is the served set, replaced whole when resources are added or removed at
	// run time (dynamic.go, under dynamicMu); a request reads one snapshot.
	routes    atomic.Pointer[routeTable]
	dynamicMu sync.Mutex
}

// New builds the handler for cfg.Resources.
func New(cfg Config) (*Server, error) {
	if cfg.Storage == nil {
		return nil, fmt.Errorf("apiserver: no storage")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, admitters: cfg.Admitters, validators: cfg.Validators}
	rt := &routeTable{byGVR: map[schema.GroupVersionResource]*entry{}}
	s.bg, s.stopBG = context.WithCancel(context.Background())
	s.streams = newStreamTransports(cfg.Nodes)
	var err error
	if s.inflight, err = newInFlight(cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight, cfg.InFlightExempt, cfg.Metrics); err != nil {
		return nil, err
	}
	s.health = s.healthMux()
	for i := range cfg.Resources {
		res := &cfg.Resources[i]
		gvr := res.GVR()
		if _, dup := rt.byGVR[gvr]; dup {
			return nil, fmt.Errorf("apiserver: resource %s registered twice", gvr)
		}
		rs := &resourceStore{s: cfg.Storage, res: res, gr: gvr.GroupResource(), storedGVR: gvr, newStored: res.New}
		if v := res.Storage; v != nil {
			rs.storedGVR = v.GVR
		}
		e := &entry{res: res, store: rs}
		e.cache = newWatchCache(s, e)
		rt.entries = append(rt.entries, e)
		rt.byGVR[gvr] = e
	}
	for _, e := range rt.entries {
		if v := e.res.Storage; v != nil {
			target := rt.byGVR[v.GVR]
			if target == nil {
				return nil, fmt.Errorf("apiserver: %s is stored as %s, which is not served", e.res.GVR(), v.GVR)
			}
			e.store.newStored = target.res.New
		}
	}
	s.routes.Store(rt)
	nsEntry := s.lookup("", "v1", "namespaces")
	if nsEntry == nil {
		return nil, fmt.Errorf("apiserver: namespaces must be served")
	}
	s.namespaces = newNamespaceCache(s, nsEntry.store.prefix(""))
	if err := s.instrument(cfg.Metrics); err != nil {
		return nil, err
	}
	return s, nil
}

// Close stops the storage watches that feed the server's caches (started on first use:
// the namespace cache, one watch cache per watched resource) and ends the API watches
// they serve. Requests served afterwards read storage directly, or fail for watches.
func (s *Server) Close() {
	s.stopBG()
}

func (s *Server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

func (s *Server) lookup(group, version, resource string) *entry {
	return s.routes.Load().byGVR[schema.GroupVersionResource{Group: group, Version: version, Resource: resource}]
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ri := parseRequestInfo(r)
	if s.metrics != nil {
		var done func()
		w, done = s.metrics.track(w, r, ri)
		defer done()
	}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("handler panic", "path", r.URL.Path, "panic", p)
			writeError(w, s.log, apierrors.NewInternalError(fmt.Errorf("%v", p)))
		}
	}()
	req := Request{Verb: ri.Verb, APIGroup: ri.APIGroup, APIVersion: ri.APIVersion, Namespace: ri.Namespace,
		Resource: ri.Resource, Subresource: ri.Subresource, Name: ri.Name, Path: r.URL.Path, IsResourceRequest: ri.IsResourceRequest}
	if !ri.IsResourceRequest {
		req.Verb = strings.ToLower(r.Method)
	}
	if s.cfg.Guard != nil {
		if create, ok := s.upgradeCreateCheck(req); ok {
			// On a copy: the guard consumes the request's impersonation headers.
			if _, err := s.cfg.Guard.Check(r.Clone(r.Context()), create); err != nil {
				writeError(w, s.log, err)
				return
			}
		}
		nr, err := s.cfg.Guard.Check(r, req)
		if err != nil {
			writeError(w, s.log, err)
			return
		}
		r = nr
	}
	done, ok := s.inflight.start(w, r, req)
	if !ok {
		return
	}
	defer done()
	r, cancel, err := s.requestDeadline(r, req)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	defer cancel()
	if err := s.serve(w, r, ri, req); err != nil {
		writeError(w, s.log, timedOut(r.Context(), err))
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, ri *requestInfo, req Request) error {
	ctx := withWriteRequest(r, ri)
	if isHealthPath(r.URL.Path) {
		s.health.ServeHTTP(w, r)
		return nil
	}
	switch r.URL.Path {
	case "/version":
		writeJSON(w, http.StatusOK, KubernetesVersion)
		return nil
	}
	if strings.HasPrefix(r.URL.Path, "/openapi/") && s.cfg.OpenAPI != nil {
		s.cfg.OpenAPI.ServeHTTP(w, r)
		return nil
	}
	if s.proxyAggregated(w, r) {
		return nil
	}
	if !ri.IsResourceRequest {
		if r.Method == http.MethodGet && s.serveDiscovery(w, r) {
			return nil
		}
		return s.notFound(w, r)
	}
	e := s.lookup(ri.APIGroup, ri.APIVersion, ri.Resource)
	if e == nil {
		return s.notFound(w, r)
	}
	if !e.res.Namespaced && ri.Namespace != "" {
		return notFoundPath()
	}
	if e.res.DeprecationWarning != "" {
		addWarnings(w, []string{e.res.DeprecationWarning})
	}
	if err := tableNotAcceptable(r, e, ri.Subresource); err != nil {
		return err
	}
	if e.res.Computed {
		return s.serveComputed(ctx, w, r, ri, req, e)
	}
	if ri.Subresource != "" {
		return s.serveSubresource(ctx, w, r, ri, req, e)
	}
	if !e.res.HasVerb(ri.Verb) {
		return apierrors.NewMethodNotSupported(e.store.gr, ri.Verb)
	}
	switch ri.Verb {
	case "get":
		return s.get(ctx, w, r, ri, e)
	case "list":
		return s.list(ctx, w, r, ri, e)
	case "watch":
		return s.watch(ctx, w, r, ri, e)
	case "create":
		if ri.Name != "" {
			return apierrors.NewMethodNotSupported(e.store.gr, "create")
		}
		if h := s.cfg.Extra[e.res.Plural]; h != nil && !e.res.HasVerb("get") {
			return h(ctx, w, r, req)
		}
		if err := s.createRefused(e); err != nil {
			return err
		}
		return s.create(ctx, w, r, ri, e)
	case "update":
		return s.update(ctx, w, r, ri, e)
	case "patch":
		return s.patch(ctx, w, r, ri, e)
	case "delete":
		return s.delete(ctx, w, r, ri, e)
	case "deletecollection":
		return s.deleteCollection(ctx, w, r, ri, e)
	}
	return apierrors.NewMethodNotSupported(e.store.gr, ri.Verb)
}

func notFoundPath() error {
	return apierrors.NewGenericServerResponse(http.StatusNotFound, "", schema.GroupResource{}, "", "", 0, false)
}

func (s *Server) serveSubresource(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, req Request, e *entry) error {
	key := e.res.Plural + "/" + ri.Subresource
	if e.res.GVK.Group != "" {
		key = e.res.GVK.Group + "/" + key
	}
	if h := s.cfg.Extra[key]; h != nil {
		return h(ctx, w, r, req)
	}
	if h := e.res.FindHandler(ri.Subresource); h != nil {
		return s.serveHandler(ctx, w, r, ri, e, h)
	}
	switch {
	case ri.Subresource == "status" && e.res.Status != nil, e.res.Subresources[ri.Subresource] != nil:
		switch ri.Verb {
		case "get":
			return s.get(ctx, w, r, ri, e)
		case "update":
			return s.update(ctx, w, r, ri, e)
		case "patch":
			return s.patch(ctx, w, r, ri, e)
		}
	case ri.Subresource == "scale" && e.res.Scale != nil:
		switch ri.Verb {
		case "get":
			return s.getScale(ctx, w, r, ri, e)
		case "update":
			return s.putScale(ctx, w, r, ri, e)
		case "patch":
			return s.patch(ctx, w, r, ri, e)
		}
	default:
		return notFoundPath()
	}
	return apierrors.NewMethodNotSupported(schema.GroupResource{Group: e.store.gr.Group, Resource: key}, ri.Verb)
}
