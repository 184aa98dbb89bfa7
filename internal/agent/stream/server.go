// Package stream is the node agent's streaming endpoint, the part of kubelet's API the
// API server talks to for `kubectl logs`, `exec`, `attach` and `port-forward`. The API
// server validates and authorizes the request, then forwards it (upgrade included) to
// this endpoint on the node; the protocols kubectl speaks end here:
//
//	GET      /containerLogs/NS/POD/UID/CONTAINER?follow&previous&tailLines&...
//	GET|POST /exec/NS/POD/UID/CONTAINER?command=...&stdin&stdout&stderr&tty
//	GET|POST /attach/NS/POD/UID/CONTAINER?stdin&stdout&stderr&tty
//	GET|POST /portForward/NS/POD/UID
//	GET      /stats/summary, /metrics/resource   (Config.Stats: resource usage)
//
// exec and attach speak WebSocket (v5.channel.k8s.io, v4.channel.k8s.io and
// v4.base64.channel.k8s.io) and SPDY (v4 down to v2.channel.k8s.io); port-forward speaks
// SPDY (portforward.k8s.io), directly or tunnelled in a WebSocket
// (SPDY/3.1+portforward.k8s.io), as kubectl 1.32 does.
//
// Authentication: the endpoint serves HTTPS with a self-signed certificate made at
// start-up (an agent on a real machine has no CA key to get one signed; the API server
// does not verify it, as Kubernetes' API server does not verify kubelets by default)
// and accepts only clients presenting a certificate from the cluster CA whose common
// name is one of Config.AllowedClients: the API server's kubelet-client identity. Who
// may exec is decided by the API server's authorization before it forwards anything.
package stream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tranche/tranche/internal/agent/runtime"
	"github.com/tranche/tranche/internal/auth/pki"
)

// APIServerClientName is the common name of the API server's client certificate for
// node agents (Kubernetes' kube-apiserver-kubelet-client); `tranche server` issues it.
const APIServerClientName = "kube-apiserver-kubelet-client"

// Runtime is what the endpoint needs of the node's container runtime
// (runtime.Manager).
type Runtime interface {
	// LogPath is the log file of a container's current or previous instance.
	LogPath(uid types.UID, container string, previous bool) (string, error)
	// ContainerRunning reports whether the container has a running instance (a
	// followed log ends when it has none).
	ContainerRunning(uid types.UID, container string) bool
	// ExecStream runs a command in a running container and returns its exit code.
	ExecStream(ctx context.Context, uid types.UID, container string, argv []string, s runtime.Streams) (int, error)
	// Attach connects to a running container's stdio until ctx ends or it exits.
	Attach(ctx context.Context, uid types.UID, container string, s runtime.Streams) error
	// PodNetNS is the network namespace of a running pod, where port-forward dials.
	PodNetNS(uid types.UID) (string, bool)
}

// Config configures the endpoint.
type Config struct {
	Runtime Runtime
	// DialPod connects to port on localhost inside a pod's network namespace
	// (netns.Dial when nil).
	DialPod func(netns string, port uint16) (net.Conn, error)
	// ClientCA (PEM) is the CA whose certificates Serve accepts.
	ClientCA []byte
	// AllowedClients are the certificate common names Serve accepts.
	AllowedClients []string
	// Stats serves kubelet's resource usage endpoints, /stats/summary and
	// /metrics/resource (internal/agent/stats); nil answers 404 there.
	Stats http.Handler
	// StreamIdleTimeout ends a session with no traffic (4 hours when zero, kubelet's).
	StreamIdleTimeout time.Duration
	Logger            *slog.Logger
}

// Server serves the streaming endpoint.
type Server struct {
	cfg Config
	log *slog.Logger
}

// New checks cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("stream: no runtime")
	}
	if cfg.DialPod == nil {
		cfg.DialPod = dialPod
	}
	if cfg.StreamIdleTimeout <= 0 {
		cfg.StreamIdleTimeout = 4 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: cfg.Logger}, nil
}

// Serve serves HTTPS on ln until ctx ends, accepting only the allowed clients.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if len(s.cfg.ClientCA) == 0 || len(s.cfg.AllowedClients) == 0 {
		return errors.New("stream: serving needs a client CA and allowed client names")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.cfg.ClientCA) {
		return errors.New("stream: the client CA holds no PEM certificate")
	}
	host, _, _ := net.SplitHostPort(ln.Addr().String())
	cert, err := selfSigned(host)
	if err != nil {
		return err
	}
	tlsConfig := &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}
	srv := &http.Server{Handler: s.authenticated(s.Handler()), TLSConfig: tlsConfig, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
	}()
	err = srv.Serve(tls.NewListener(batchListener{ln}, tlsConfig))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// authenticated lets through only verified clients with an allowed common name.
func (s *Server) authenticated(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || !slices.Contains(s.cfg.AllowedClients, r.TLS.VerifiedChains[0][0].Subject.CommonName) {
			http.Error(w, "Forbidden: only the API server may use this endpoint", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Handler routes the endpoint's requests, without authentication (tests).
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		get := r.Method == http.MethodGet
		post := r.Method == http.MethodPost
		switch {
		case s.cfg.Stats != nil && (r.URL.Path == "/stats/summary" || r.URL.Path == "/metrics/resource"):
			s.cfg.Stats.ServeHTTP(w, r)
		case len(parts) == 5 && parts[0] == "containerLogs" && get:
			s.serveLogs(w, r, types.UID(parts[3]), parts[4])
		case len(parts) == 5 && parts[0] == "exec" && (get || post):
			s.serveExec(w, r, parts[1]+"/"+parts[2], types.UID(parts[3]), parts[4])
		case len(parts) == 5 && parts[0] == "attach" && (get || post):
			s.serveAttach(w, r, parts[1]+"/"+parts[2], types.UID(parts[3]), parts[4])
		case len(parts) == 4 && parts[0] == "portForward" && (get || post):
			s.servePortForward(w, r, parts[1]+"/"+parts[2], types.UID(parts[3]))
		default:
			http.Error(w, fmt.Sprintf("no streaming endpoint %s %s", r.Method, r.URL.Path), http.StatusNotFound)
		}
	})
}

// selfSigned makes the endpoint's serving certificate.
func selfSigned(host string) (tls.Certificate, error) {
	req := pki.SelfSignedRequest{
		CommonName: "tranche-agent@" + host,
		NotBefore:  time.Now().Add(-5 * time.Minute),
		NotAfter:   time.Now().Add(10 * 365 * 24 * time.Hour),
	}
	if ip := net.ParseIP(host); ip != nil {
		req.IPs = []net.IP{ip}
	}
	cert, err := pki.SelfSignedTLS(req)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("stream: serving certificate: %w", err)
	}
	return cert, nil
}

// badRequest answers a request that cannot be served with a plain-text 400.
func badRequest(w http.ResponseWriter, format string, args ...any) {
	http.Error(w, fmt.Sprintf(format, args...), http.StatusBadRequest)
}

// isTrue reads a boolean query parameter as Kubernetes does.
func isTrue(v string) bool { return v == "true" || v == "1" }
