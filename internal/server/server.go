package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/aggregator"
	"github.com/tranche/tranche/internal/allocator"
	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/apiserver/openapi"
	"github.com/tranche/tranche/internal/auth/pki"
	"github.com/tranche/tranche/internal/controller/flowcontrol"
	"github.com/tranche/tranche/internal/controller/servicecidr"
	"github.com/tranche/tranche/internal/controller/servicelb"
	"github.com/tranche/tranche/internal/crd"
	"github.com/tranche/tranche/internal/defaulttolerations"
	"github.com/tranche/tranche/internal/logging"
	"github.com/tranche/tranche/internal/podsecurity"
	"github.com/tranche/tranche/internal/registry/all"
	"github.com/tranche/tranche/internal/runtimeclass"
	"github.com/tranche/tranche/internal/storage"
	"github.com/tranche/tranche/internal/storage/embedded"
	"github.com/tranche/tranche/internal/storage/etcd"
)

// Config is `tranche server`'s configuration.
type Config struct {
	// DataDir holds the PKI, the kubeconfig and (embedded) etcd's data.
	DataDir string
	// Listen is the HTTPS address (127.0.0.1:6443).
	Listen string
	// ExtraListen are further addresses (the cluster network listener 10.240.0.1:6443).
	ExtraListen []string
	// Listeners are further listeners, already open, served with TLS like Listen (the
	// cluster listener that `tranche up` opens inside the underlay namespace). Stopping
	// the server closes them; the caller closes them when Run fails before serving.
	Listeners []net.Listener
	// EtcdServers selects an external etcd cluster; empty means embedded.
	EtcdServers []string
	// CompactInterval is how often history is compacted; 0 means 5 minutes.
	CompactInterval time.Duration
	// ServiceCIDR is the ClusterIP range (10.96.0.0/12); its first host is the
	// kubernetes Service and its tenth the DNS Service.
	ServiceCIDR netip.Prefix
	// ClusterCIDR is the pod range nodes' podCIDRs are cut from (10.244.0.0/16).
	ClusterCIDR netip.Prefix
	// NodePorts is the NodePort range (30000-32767).
	NodePorts allocator.PortRange
	// LoadBalancerPool is where LoadBalancer Services get their address from
	// (servicelb.DefaultPool on a local cluster); empty runs no load-balancer controller.
	LoadBalancerPool servicelb.Pool
	// AdvertiseAddress is the address the kubernetes Service's endpoints point at (the
	// cluster network listener, 10.240.0.1).
	AdvertiseAddress netip.Addr
	// AdvertisePort is the port of those endpoints; 0 means Listen's port.
	AdvertisePort int
	// DNS configures the cluster DNS Deployment the server creates (bootstrap.go).
	DNS DNSConfig
	// ClusterDial reaches node agents and pods (logs, exec, port-forward, proxy); nil
	// dials directly. `tranche up` dials from its underlay namespace.
	ClusterDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// PodSecurity configures Pod Security Admission: the cluster's default levels
	// (privileged when empty, as Kubernetes) and the exemptions.
	PodSecurity podsecurity.Config
	// HPASyncPeriod is how often each HorizontalPodAutoscaler is synced; 0 means 15s
	// (kube-controller-manager's --horizontal-pod-autoscaler-sync-period).
	HPASyncPeriod time.Duration
	// NodeMonitorGracePeriod is how long a node may go silent before it is Unknown
	// (kube-controller-manager's --node-monitor-grace-period); 0 means 50s.
	NodeMonitorGracePeriod time.Duration
	// ClusterSigningDuration is the longest life of a certificate the CSR signers issue
	// (kube-controller-manager's --cluster-signing-duration); 0 means a year.
	ClusterSigningDuration time.Duration
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight bound the read-only and
	// mutating requests served at once (kube-apiserver's --max-requests-inflight and
	// --max-mutating-requests-inflight); 0 means no limit.
	MaxRequestsInFlight, MaxMutatingRequestsInFlight int
	// RequestTimeout bounds requests that are not long-running (--request-timeout);
	// 0 means apiserver.DefaultRequestTimeout.
	RequestTimeout time.Duration
	// LeaderElection elects the controller manager and the scheduler among servers
	// sharing an etcd cluster.
	LeaderElection LeaderElection
	Logger         *slog.Logger
}

// paths of files under DataDir.
func (c *Config) pkiDir() string         { return filepath.Join(c.DataDir, "pki") }
func (c *Config) kubeconfigPath() string { return filepath.Join(c.DataDir, "kubeconfig") }

// Run serves until ctx ends. ready (may be nil) is closed once the server answers and
// the bootstrap objects exist.
func Run(ctx context.Context, cfg Config, ready chan<- struct{}) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	store, closeStore, err := openStorage(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeStore()

	ca, err := pki.EnsureCA(cfg.pkiDir())
	if err != nil {
		return err
	}
	frontProxy, err := pki.EnsureFrontProxy(cfg.pkiDir())
	if err != nil {
		return err
	}
	host, portStr, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", cfg.Listen, err)
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.IP(nthAddr(cfg.ServiceCIDR, 1).AsSlice()), net.IP(cfg.AdvertiseAddress.AsSlice())}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		ips = append(ips, ip)
	}
	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	servingCert, servingKey, err := pki.EnsureServing(cfg.pkiDir(), ca, dns, ips)
	if err != nil {
		return err
	}
	adminCert, adminKey, err := pki.EnsureClient(cfg.pkiDir(), ca, "admin", "admin", []string{"system:masters"})
	if err != nil {
		return err
	}
	// The identity the API server presents to node agents' streaming endpoints.
	nodeCert, nodeKey, err := pki.EnsureClient(cfg.pkiDir(), ca, "apiserver-kubelet-client", "kube-apiserver-kubelet-client", nil)
	if err != nil {
		return err
	}
	nodePair, err := tls.X509KeyPair(nodeCert, nodeKey)
	if err != nil {
		return fmt.Errorf("kubelet client certificate: %w", err)
	}
	server := "https://" + net.JoinHostPort(loopbackHost(host), portStr)
	if err := pki.WriteKubeconfig(cfg.kubeconfigPath(), server, ca.CertPEM, adminCert, adminKey, ""); err != nil {
		return err
	}

	var isReady atomic.Bool
	sec, err := newSecurity(cfg, ca, frontProxy)
	if err != nil {
		return err
	}
	rv := &reviews{sec: sec}
	mx := &resourceMetrics{}
	resources := all.Resources()
	docs, err := openapi.Build(resources, apiserver.KubernetesVersion.GitVersion)
	if err != nil {
		return fmt.Errorf("openapi: %w", err)
	}
	alloc := &allocator.Services{CIDR: cfg.ServiceCIDR, Ports: cfg.NodePorts, Store: store,
		Reserved: []netip.Addr{nthAddr(cfg.ServiceCIDR, 10)}}
	if err := alloc.Repair(ctx, log.With("component", "allocator")); err != nil {
		return err
	}
	psa, err := podsecurity.New(cfg.PodSecurity, requestUserName, log.With("component", "podsecurity"))
	if err != nil {
		return err
	}
	reg := newMetricsRegistry()
	qa, err := newQuotaAdmission(ctx, server, ca.CertPEM, adminCert, adminKey, log)
	if err != nil {
		return err
	}
	webhooks := newWebhooks(cfg)
	crdOpenAPI := crd.NewOpenAPI(docs.Handler())
	aggregated := &aggregator.Proxy{User: requestUserInfo, Dial: cfg.ClusterDial, ClientCert: frontProxy.CertPEM, ClientKey: frontProxy.KeyPEM}
	api, err := apiserver.New(apiserver.Config{
		Metrics:    reg,
		Storage:    store,
		Mutators:   []apiserver.Mutator{defaulttolerations.New(defaulttolerations.DefaultSeconds, defaulttolerations.DefaultSeconds), runtimeclass.Admission{}, &rbacEscalation{sec: sec}, csrAdmission{sec: sec}, qa.limits, newServiceAccountAdmission(), priorityMutator{}, webhooks},
		Admitters:  []apiserver.Admitter{alloc},
		Validators: []apiserver.Validator{sec.nodeRestriction, psa, qa.limits, priorityValidator{}, ctbAttest{sec: sec}, pcrAdmission{sec: sec}, webhooks, qa.quota},
		Resources:  resources,
		Logger:     log.With("component", "apiserver"),
		Guard:      sec,
		Aggregated: aggregated,
		OpenAPI:    crdOpenAPI,
		Extra:      rv.handlers(),
		Computed:   mx.handlers(),
		Nodes: &apiserver.Nodes{Dial: cfg.ClusterDial,
			TLS: &tls.Config{Certificates: []tls.Certificate{nodePair}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}, //nolint:gosec // see apiserver.Nodes.TLS.
		MaxRequestsInFlight: cfg.MaxRequestsInFlight, MaxMutatingRequestsInFlight: cfg.MaxMutatingRequestsInFlight,
		RequestTimeout: cmp.Or(cfg.RequestTimeout, apiserver.DefaultRequestTimeout),
		InFlightExempt: inFlightExempt,
		Ready: func() error {
			if !isReady.Load() {
				return errors.New("bootstrap not finished")
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(servingCert, servingKey)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	tlsConfig := &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    clientCAs(ca, frontProxy),
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}
	front, err := newOIDCDiscovery(sec, sec.issuer, newObservability(sec, api, reg))
	if err != nil {
		return err
	}
	httpServer := &http.Server{Handler: front, TLSConfig: tlsConfig, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slogErrorLog(log)}
	errc := make(chan error, 1+len(cfg.ExtraListen)+len(cfg.Listeners))
	for _, ln := range cfg.Listeners {
		log.Info("serving", "address", ln.Addr().String())
		go func() { errc <- httpServer.Serve(tls.NewListener(ln, tlsConfig)) }()
	}
	for _, addr := range append([]string{cfg.Listen}, cfg.ExtraListen...) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen %s: %w", addr, err)
		}
		log.Info("serving", "address", addr)
		go func() { errc <- httpServer.Serve(tls.NewListener(ln, tlsConfig)) }()
	}
	qa.start(ctx)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = httpServer.Shutdown(sctx)
		api.Close()
	}()

	// The control plane's own clients log the API's deprecation warnings (they still
	// read v1 Endpoints) at debug level instead of printing them.
	loop := logging.QuietWarnings(&rest.Config{
		Host:            server,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM, CertData: adminCert, KeyData: adminKey},
		QPS:             200,
		Burst:           400,
	}, log)
	if err := bootstrapObjects(ctx, loop, cfg, log); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	client, err := kubernetes.NewForConfig(loop)
	if err != nil {
		return err
	}
	rv.client.Store(client)
	if err := ensureSystemPriorityClasses(ctx, client, log); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if err := sec.watchCaches(ctx, informers.NewSharedInformerFactory(client, 0)); err != nil {
		return fmt.Errorf("authorization caches: %w", err)
	}
	if err := sec.watchBootstrapTokens(ctx, client); err != nil {
		return err
	}
	if err := startWebhooks(ctx, webhooks, loop, client, sec); err != nil {
		return fmt.Errorf("admission webhooks: %w", err)
	}
	if err := mx.start(ctx, loop, nodePair, cfg.ClusterDial, log.With("component", "metrics")); err != nil {
		return fmt.Errorf("resource metrics: %w", err)
	}
	if err := startCRDs(ctx, api, loop, crdOpenAPI, cfg.ClusterDial, log.With("component", "crd")); err != nil {
		return fmt.Errorf("customresourcedefinitions: %w", err)
	}
	if err := startExtensionAuth(ctx, client, ca.CertPEM, frontProxy, log.With("component", "extension-apiserver-authentication")); err != nil {
		return fmt.Errorf("extension-apiserver-authentication: %w", err)
	}
	if err := aggregator.Start(ctx, aggregator.Config{Loopback: loop, Dial: cfg.ClusterDial, Log: log.With("component", "aggregator"), Proxy: aggregated}); err != nil {
		return err
	}
	apiEndpoints := newAPIEndpoints(store, client, cfg, log.With("component", "apiserver-endpoints"))
	if err := apiEndpoints.reconcile(ctx); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if err := startIdentityLease(ctx, client, log.With("component", "apiserver-identity")); err != nil {
		return err
	}
	isReady.Store(true)
	if ready != nil {
		close(ready)
	}
	log.Info("ready", "kubeconfig", cfg.kubeconfigPath())

	go compactLoop(ctx, store, cfg.CompactInterval, log)
	go apiEndpoints.run(ctx, apiLeaseInterval)
	go keepJoinObjects(ctx, client, cfg, ca.CertPEM, log.With("component", "join"))
	go servicecidr.KeepDefault(ctx, client, cfg.ServiceCIDR, 10*time.Second, log.With("component", "default-servicecidr"))
	go flowcontrol.KeepBootstrap(ctx, client, time.Minute, log.With("component", "apf-bootstrap"))
	controllersStopped, err := startControllers(ctx, loop, controllerOptions{clusterCIDR: cfg.ClusterCIDR, lbPool: cfg.LoadBalancerPool,
		caPEM: ca.CertPEM, pvRoot: filepath.Join(cfg.DataDir, "pv"), hpaSyncPeriod: cfg.HPASyncPeriod,
		nodeMonitorGrace: cfg.NodeMonitorGracePeriod, signingDuration: cfg.ClusterSigningDuration, alloc: alloc}, cfg.LeaderElection, reg, log)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		// The controllers' last writes go through this server's loopback client: wait
		// for their workers before the deferred closes stop the store under them.
		select {
		case err := <-controllersStopped:
			if err != nil {
				log.Warn("controller manager", "err", err)
			}
		case <-time.After(30 * time.Second):
			log.Warn("controller manager: workers still running 30s after the stop; stopping without them")
		}
		// Leave the kubernetes endpoints before going, as kube-apiserver does.
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := apiEndpoints.remove(rctx); err != nil {
			log.Warn("leaving the kubernetes endpoints", "err", err)
		}
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

func loopbackHost(host string) string {
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		return "127.0.0.1"
	}
	return host
}

func openStorage(ctx context.Context, cfg Config, log *slog.Logger) (storage.Interface, func(), error) {
	if len(cfg.EtcdServers) > 0 {
		client, err := etcd.Dial(ctx, cfg.EtcdServers, log.With("component", "etcd-client"))
		if err != nil {
			return nil, nil, err
		}
		s := etcd.New(client)
		return s, func() { _ = s.Close() }, nil
	}
	srv, err := embedded.Start(ctx, embedded.Config{DataDir: filepath.Join(cfg.DataDir, "etcd"), Logger: log.With("component", "etcd")})
	if err != nil {
		return nil, nil, err
	}
	s := etcd.New(srv.Client())
	return s, func() { _ = s.Close(); _ = srv.Close() }, nil
}

// compactLoop keeps etcd's history bounded: every interval it compacts what is older
// than the revision seen at the previous tick, so watchers have at least one interval
// to catch up, as Kubernetes does.
func compactLoop(ctx context.Context, s storage.Interface, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = 5 * time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if last > 0 {
			if err := s.Compact(ctx, last); err != nil && !errors.Is(err, storage.ErrCompacted) {
				log.Warn("compaction failed", "revision", last, "err", err)
			}
		}
		rev, err := s.Revision(ctx)
		if err == nil {
			last = rev
		}
	}
}

// slogErrorLog routes net/http's own messages (TLS handshake failures of probing
// clients, mostly) to debug level.
func slogErrorLog(log *slog.Logger) *stdlog.Logger {
	return slog.NewLogLogger(log.Handler(), slog.LevelDebug)
}

// nthAddr returns the n-th address of prefix (1 = first host).
func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for i := 0; i < n; i++ {
		a = a.Next()
	}
	return a
}
