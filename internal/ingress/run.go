package ingress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/tranche/tranche/internal/events"
	"github.com/tranche/tranche/internal/syspod"
)

// RunConfig is what `tranche ingress` runs with.
type RunConfig struct {
	Logger *slog.Logger
	// Kubeconfig is read when set; else the pod's service account is used.
	Kubeconfig string
	// APIServer overrides the API server URL (in a pod: instead of KUBERNETES_SERVICE_HOST).
	APIServer string
	// HTTPListen, HTTPSListen and MetricsListen are listen addresses; empty disables one.
	// MetricsListen serves /metrics, /healthz and /ready (200 once the caches synced).
	HTTPListen, HTTPSListen, MetricsListen string
	// PublishService (namespace/name) is the Service whose status.loadBalancer is copied to
	// every served Ingress; empty leaves Ingress status alone.
	PublishService string
	Proxy          ProxyConfig
	MaxHeaderBytes int
}

// Run serves Ingresses until ctx ends.
func Run(ctx context.Context, cfg RunConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg.Proxy.Logger = log
	restCfg, err := syspod.Config(cfg.Kubeconfig, cfg.APIServer, syspod.ServiceAccountDir)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	listen := func(flag, addr string) (net.Listener, error) {
		if addr == "" {
			return nil, nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("--%s %s: %w", flag, addr, err)
		}
		return ln, nil
	}
	var lns []net.Listener
	closeAll := func() {
		for _, l := range lns {
			if l != nil {
				l.Close()
			}
		}
	}
	for _, l := range []struct{ flag, addr string }{{"http-listen", cfg.HTTPListen}, {"https-listen", cfg.HTTPSListen}, {"metrics-listen", cfg.MetricsListen}} {
		ln, err := listen(l.flag, l.addr)
		if err != nil {
			closeAll()
			return err
		}
		lns = append(lns, ln)
	}
	fallback, err := FallbackCertificate(time.Now())
	if err != nil {
		closeAll()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if cfg.Proxy.AccessLog && cfg.Proxy.AccessLogger == nil {
		// Access lines go out in batches (see LineBuffer). The flusher outlives ctx so
		// that the lines of requests finishing during the graceful shutdown are written
		// too, the last ones before Run returns.
		lctx, stopLog := context.WithCancel(context.WithoutCancel(ctx))
		var flushed <-chan struct{}
		cfg.Proxy.AccessLogger, flushed = NewAccessLogger(lctx, os.Stderr)
		defer func() { stopLog(); <-flushed }()
		cfg.Proxy.AccessLog = log.Enabled(ctx, slog.LevelInfo)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Proxy.Metrics = NewMetrics(reg)
	p := NewProxy(cfg.Proxy)

	wake := make(chan struct{}, 1)
	c, err := newInformerCache(ctx, client, func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		closeAll()
		return err
	}
	if mln := lns[2]; mln != nil {
		defer syspod.ServeStatus(mln, reg, "/healthz", "ok", c.Synced)()
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.Synced) {
		closeAll()
		return ctx.Err()
	}
	s := &syncer{client: client, cache: c, proxy: p, log: log, publish: cfg.PublishService,
		recorder: events.NewRecorder(ctx, client, "tranche-ingress"), posted: map[Problem]bool{}}
	// The first table is in place before the listeners serve.
	go s.run(ctx, wake, s.sync(ctx), 100*time.Millisecond, time.Second)
	log.Info("serving Ingresses", "http", cfg.HTTPListen, "https", cfg.HTTPSListen, "metrics", cfg.MetricsListen, "publishService", cfg.PublishService)
	err = Serve(ctx, p, ServeConfig{HTTP: lns[0], HTTPS: lns[1], Fallback: fallback, MaxHeaderBytes: cfg.MaxHeaderBytes, Logger: log})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// syncer rebuilds the Table and applies what follows from it: Events and Ingress status.
type syncer struct {
	client   kubernetes.Interface
	cache    Cache
	proxy    *Proxy
	log      *slog.Logger
	publish  string
	recorder record.EventRecorder
	posted   map[Problem]bool
}

// maxStatusRetry bounds the wait before writing a failed Ingress status again.
const maxStatusRetry = 30 * time.Second

// run syncs after every wake, at most once per minGap (a burst of changes is one
// rebuild), until ctx ends; ok says whether the sync before it succeeded. A sync whose
// status writes failed is repeated after retry, doubling up to maxStatusRetry while it
// keeps failing, without waiting for another change: the informer would never bring
// one for a write that did not happen.
func (s *syncer) run(ctx context.Context, wake <-chan struct{}, ok bool, minGap, retry time.Duration) {
	tick := time.NewTicker(minGap)
	defer tick.Stop()
	backoff := retry
	for {
		var again <-chan time.Time
		if ok {
			backoff = retry
		} else {
			again = time.After(backoff)
			backoff = min(2*backoff, maxStatusRetry)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-again:
		}
		ok = s.sync(ctx)
	}
}

// sync rebuilds the table, posts new problems as Events and writes the Ingress status
// that changed; it reports whether every status write succeeded.
func (s *syncer) sync(ctx context.Context) bool {
	tab := Build(s.cache)
	s.proxy.SetTable(tab)
	byID := map[string]*networkingv1.Ingress{}
	for _, ing := range s.cache.Ingresses() {
		byID[ing.Namespace+"/"+ing.Name] = ing
	}
	now := map[Problem]bool{}
	for _, pr := range tab.Problems {
		now[pr] = true
		if s.posted[pr] {
			continue
		}
		if ing := byID[pr.Ingress]; ing != nil {
			s.recorder.Event(ing, v1.EventTypeWarning, pr.Reason, pr.Message)
			s.log.Warn("ingress problem", "ingress", pr.Ingress, "reason", pr.Reason, "message", pr.Message)
		}
	}
	s.posted = now
	ok := true
	for _, ing := range StatusUpdates(s.cache, tab, s.publish) {
		if _, err := s.client.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, ing, metav1.UpdateOptions{}); err != nil {
			s.log.Warn("updating ingress status, will retry", "ingress", ing.Namespace+"/"+ing.Name, "err", err)
			ok = false
		}
	}
	return ok
}

// StatusUpdates returns copies of the served Ingresses whose status.loadBalancer differs
// from the publish Service's (namespace/name), with the new status set. Nothing when
// publish is empty or the Service is not there.
func StatusUpdates(c Cache, tab *Table, publish string) []*networkingv1.Ingress {
	if publish == "" {
		return nil
	}
	ns, name, err := cache.SplitMetaNamespaceKey(publish)
	if err != nil {
		return nil
	}
	svc, ok := c.Service(ns, name)
	if !ok {
		return nil
	}
	var want []networkingv1.IngressLoadBalancerIngress
	for _, in := range svc.Status.LoadBalancer.Ingress {
		lb := networkingv1.IngressLoadBalancerIngress{IP: in.IP, Hostname: in.Hostname}
		for _, p := range in.Ports {
			lb.Ports = append(lb.Ports, networkingv1.IngressPortStatus{Port: p.Port, Protocol: p.Protocol, Error: p.Error})
		}
		want = append(want, lb)
	}
	served := map[string]bool{}
	for _, id := range tab.Ingresses {
		served[id] = true
	}
	var out []*networkingv1.Ingress
	for _, ing := range c.Ingresses() {
		if !served[ing.Namespace+"/"+ing.Name] || apiequality.Semantic.DeepEqual(ing.Status.LoadBalancer.Ingress, want) {
			continue
		}
		cp := ing.DeepCopy()
		cp.Status.LoadBalancer.Ingress = want
		out = append(out, cp)
	}
	return out
}
