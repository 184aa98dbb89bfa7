package dns

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/tranche/tranche/internal/syspod"
)

// NewInformerCache returns the production Cache: shared informers on Services,
// EndpointSlices, Namespaces and Pods (stripped to their addresses and namespace as
// they arrive), indexed as the lookups need. It starts them; Synced turns true once
// all four have listed.
func NewInformerCache(ctx context.Context, client kubernetes.Interface) (Cache, error) {
	f := informers.NewSharedInformerFactory(client, 0)
	svc := f.Core().V1().Services().Informer()
	slices := f.Discovery().V1().EndpointSlices().Informer()
	ns := f.Core().V1().Namespaces().Informer()
	pods := f.Core().V1().Pods().Informer()
	if err := pods.SetTransform(stripPod); err != nil {
		return nil, err
	}
	for _, x := range []struct {
		inf cache.SharedIndexInformer
		idx cache.Indexers
	}{{svc, serviceIndexers()}, {slices, sliceIndexers()}, {pods, podIndexers()}} {
		if err := x.inf.AddIndexers(x.idx); err != nil {
			return nil, err
		}
	}
	f.Start(ctx.Done())
	s := &stores{services: svc.GetIndexer(), slices: slices.GetIndexer(), pods: pods.GetIndexer(), namespaces: ns.GetIndexer()}
	s.synced = func() bool {
		return svc.HasSynced() && slices.HasSynced() && ns.HasSynced() && pods.HasSynced()
	}
	return s, nil
}

// RunConfig is `tranche dns`'s configuration.
type RunConfig struct {
	Config
	// Kubeconfig is a kubeconfig file; empty means in-cluster (the pod's service
	// account token and CA).
	Kubeconfig string
	// APIServer overrides the API server's URL (in-cluster: instead of
	// KUBERNETES_SERVICE_HOST/PORT).
	APIServer string
	// Listen is the UDP and TCP address of the DNS server (:53).
	Listen string
	// MetricsListen serves /metrics, /ready (200 once the caches synced) and /health.
	MetricsListen string
}

// Run serves DNS until ctx ends.
func Run(ctx context.Context, cfg RunConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
		cfg.Logger = log
	}
	restCfg, err := syspod.Config(cfg.Kubeconfig, cfg.APIServer, syspod.ServiceAccountDir)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", cfg.Listen, err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		pc.Close()
		return fmt.Errorf("--listen %s: %w", cfg.Listen, err)
	}
	var mln net.Listener
	if cfg.MetricsListen != "" {
		if mln, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			pc.Close()
			ln.Close()
			return fmt.Errorf("--metrics-listen %s: %w", cfg.MetricsListen, err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := NewInformerCache(ctx, client)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Metrics = reg
	if cfg.ServerLabel == "" {
		cfg.ServerLabel = "dns://" + cfg.Listen
	}
	h, err := NewHandler(cfg.Config, c)
	if err != nil {
		return err
	}
	if mln != nil {
		defer syspod.ServeStatus(mln, reg, "/health", "OK", c.Synced)()
	}
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), c.Synced) {
			log.Info("caches synced: answering the cluster zone", "zone", h.zone.origin)
		}
	}()
	log.Info("serving DNS", "listen", cfg.Listen, "zone", h.zone.origin, "upstreams", cfg.Upstreams,
		"reverseZonesOf", cfg.ReverseCIDRs, "metrics", cfg.MetricsListen)
	return Serve(ctx, h, pc, ln)
}
