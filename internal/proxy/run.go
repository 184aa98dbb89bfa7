package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tranche/tranche/internal/tombstone"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/knftables"
)

// Default listen addresses of a node's proxy: kube-proxy's ports and binds. Metrics are
// served on the node's loopback only (--metrics-bind-address 127.0.0.1:10249), so pods
// cannot read them; healthz stays on every address (--healthz-bind-address
// 0.0.0.0:10256) because load balancers probe it from outside the node.
const (
	DefaultHealthzBindAddress = "0.0.0.0:10256"
	DefaultMetricsBindAddress = "127.0.0.1:10249"
)

// RunConfig is what a node's proxy runs with.
type RunConfig struct {
	Config
	// Mode is the proxy mode (ModeNFTables, ModeIPTables or ModeIPVS; "" is
	// ModeNFTables). NewRunner removes the other modes' rules before building its
	// proxier.
	Mode string
	// IPVSScheduler is the IPVS scheduler of mode ipvs ("" is DefaultIPVSScheduler).
	IPVSScheduler string
	// Client watches Services, EndpointSlices and the node itself.
	Client kubernetes.Interface
	// NFT writes the table; nil uses a Kernel (the nft command in the current network
	// namespace).
	NFT knftables.Interface
	// IPTables writes the iptables rules of mode iptables and removes them in the other
	// modes; nil uses iptables-restore and iptables-save in the current network
	// namespace.
	IPTables IPTables
	// IPVS programs the virtual servers of mode ipvs; nil uses the kernel's (mode ipvs
	// then needs IPVSSupported).
	IPVS IPVSHandle
	// Conntrack cleans UDP entries; nil uses netlink in the current network namespace.
	Conntrack Conntrack
	// HealthzBindAddress serves /healthz and /livez; "" means DefaultHealthzBindAddress.
	HealthzBindAddress string
	// MetricsBindAddress serves /metrics and /proxyMode; "" means
	// DefaultMetricsBindAddress.
	MetricsBindAddress string
	// MinSyncPeriod is the least time between two syncs (0: sync at once).
	MinSyncPeriod time.Duration
	// Metrics receives the kubeproxy_* metrics and is what /metrics serves (nil: a new
	// registry).
	Metrics *prometheus.Registry
	// Logger receives the proxy's logs (nil: discarded).
	Logger *slog.Logger
	// Recorder receives the Warning Events about skipped input (nil: none); see
	// NewEventRecorder.
	Recorder EventRecorder
}

// EventComponent is the source component (and reporting controller) of the proxy's
// Events, as kube-proxy's are "kube-proxy".
const EventComponent = "tranche-proxy"

// NewEventRecorder returns the recorder of a node's proxy: core/v1 Events written
// through client, from EventComponent on host nodeName (each node's proxy reports
// what it skipped, as kube-proxy does). Its broadcaster stops when ctx ends; client-go
// aggregates repeated Events.
func NewEventRecorder(ctx context.Context, client kubernetes.Interface, nodeName string) EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		b.Shutdown()
	}()
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: EventComponent, Host: nodeName})
}

// Runner is a node's service proxy: informers on Services, EndpointSlices and the
// node, the Proxier they feed, and its health and metrics servers.
type Runner struct {
	cfg       RunConfig
	proxier   ModeProxier
	health    *HealthServer
	svcHealth *ServiceHealthServer
	healthLn  net.Listener
	metricsLn net.Listener
	log       *slog.Logger
}

// NewRunner prepares a node's proxy: it checks that its mode can be driven (nft,
// iptables-restore, the ip_vs kernel module), removes the rules of the other modes,
// makes the service CIDR routable and opens the health and metrics ports, so that a
// node that cannot proxy fails at start rather than later. Run starts it.
func NewRunner(cfg RunConfig) (*Runner, error) {
	if cfg.Client == nil {
		return nil, errors.New("proxy: no API client")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
	}
	if cfg.HealthzBindAddress == "" {
		cfg.HealthzBindAddress = DefaultHealthzBindAddress
	}
	if cfg.MetricsBindAddress == "" {
		cfg.MetricsBindAddress = DefaultMetricsBindAddress
	}
	mode, err := ParseMode(field.NewPath("mode"), cfg.Mode)
	if err != nil {
		return nil, fmt.Errorf("proxy: node %q: %w", cfg.NodeName, err)
	}
	cfg.Mode = mode
	if err := checkMode(&cfg); err != nil {
		return nil, fmt.Errorf("proxy: node %q: %s mode: %w", cfg.NodeName, mode, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err = cleanupOtherModes(ctx, mode, kernelCleaners(cfg.NFT, cfg.IPTables), log)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("proxy: node %q: %w", cfg.NodeName, err)
	}
	if cfg.Conntrack == nil {
		cfg.Conntrack = NetlinkConntrack{}
	}
	if cfg.NodeIP.IsValid() && cfg.ServiceCIDR.IsValid() {
		added, err := ensureServiceRoute(cfg.ServiceCIDR, cfg.NodeIP)
		if err != nil {
			return nil, fmt.Errorf("proxy: node %q: %w", cfg.NodeName, err)
		}
		if added {
			log.Info("the node had no route for the service CIDR: added one through the node address's interface", "serviceCIDR", cfg.ServiceCIDR.String(), "nodeIP", cfg.NodeIP.String())
		}
	}
	r := &Runner{cfg: cfg, log: log, health: NewHealthServer(0, nil)}
	r.svcHealth = NewServiceHealthServer(nil, r.health.Healthy, log)
	if r.healthLn, err = net.Listen("tcp", cfg.HealthzBindAddress); err != nil {
		return nil, fmt.Errorf("proxy: node %q: health server: %w", cfg.NodeName, err)
	}
	if r.metricsLn, err = net.Listen("tcp", cfg.MetricsBindAddress); err != nil {
		r.healthLn.Close()
		return nil, fmt.Errorf("proxy: node %q: metrics server: %w", cfg.NodeName, err)
	}
	r.proxier, err = newModeProxier(cfg, ProxierConfig{
		Config: cfg.Config, MinSyncPeriod: cfg.MinSyncPeriod, Logger: log, Registerer: cfg.Metrics,
		Health: r.health, ServiceHealth: r.svcHealth, Conntrack: cfg.Conntrack, Recorder: cfg.Recorder,
	})
	if err != nil {
		r.healthLn.Close()
		r.metricsLn.Close()
		return nil, err
	}
	return r, nil
}

// Run watches the API and keeps the table in sync until ctx ends. The first sync waits
// for the informers' initial lists, so that it never writes a partial table.
func (r *Runner) Run(ctx context.Context) error {
	go serveUntilDone(ctx, r.healthLn, r.health, r.log, "health")
	metrics := http.NewServeMux()
	metrics.Handle("/metrics", promhttp.HandlerFor(r.cfg.Metrics, promhttp.HandlerOpts{}))
	metrics.Handle("/proxyMode", proxyModeHandler(r.cfg.Mode))
	go serveUntilDone(ctx, r.metricsLn, metrics, r.log, "metrics")
	defer r.svcHealth.Close()

	factory := informers.NewSharedInformerFactory(r.cfg.Client, 0)
	svcs := factory.Core().V1().Services().Informer()
	if _, err := svcs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*v1.Service); ok {
				r.proxier.OnServiceAdd(s)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1.Service)
			c, ok2 := cur.(*v1.Service)
			if ok1 && ok2 {
				r.proxier.OnServiceUpdate(o, c)
			}
		},
		DeleteFunc: func(obj any) {
			if s := tombstone.As[*v1.Service](obj); s != nil {
				r.proxier.OnServiceDelete(s)
			}
		},
	}); err != nil {
		return fmt.Errorf("proxy: node %q: %w", r.cfg.NodeName, err)
	}
	slicesInf := factory.Discovery().V1().EndpointSlices().Informer()
	if _, err := slicesInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				r.proxier.OnEndpointSliceAdd(s)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*discoveryv1.EndpointSlice)
			c, ok2 := cur.(*discoveryv1.EndpointSlice)
			if ok1 && ok2 {
				r.proxier.OnEndpointSliceUpdate(o, c)
			}
		},
		DeleteFunc: func(obj any) {
			if s := tombstone.As[*discoveryv1.EndpointSlice](obj); s != nil {
				r.proxier.OnEndpointSliceDelete(s)
			}
		},
	}); err != nil {
		return fmt.Errorf("proxy: node %q: %w", r.cfg.NodeName, err)
	}
	// The node's own object says whether it is being deleted (/healthz then fails).
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(r.cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", r.cfg.NodeName).String()
	}))
	onNode := func(obj any) {
		if n, ok := obj.(*v1.Node); ok {
			r.health.SetNodeEligible(nodeEligible(n))
			// Hints follow the Node's zone label, as the EndpointSlice controller
			// writes them from it; --zone is only the value before the Node is seen.
			r.proxier.SetZone(n.Labels[v1.LabelTopologyZone])
		}
	}
	if _, err := nodeFactory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onNode,
		UpdateFunc: func(_, cur any) { onNode(cur) },
	}); err != nil {
		return fmt.Errorf("proxy: node %q: %w", r.cfg.NodeName, err)
	}
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer nodeFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), svcs.HasSynced, slicesInf.HasSynced) {
		return ctx.Err()
	}
	r.log.Info("service proxy running", "mode", r.cfg.Mode, "healthz", r.healthLn.Addr().String(), "metrics", r.metricsLn.Addr().String())
	r.proxier.Run(ctx)
	return nil
}

// nodeEligible follows upstream: a node being deleted, or marked for deletion by the
// cluster autoscaler, should not get new load-balanced traffic.
func nodeEligible(n *v1.Node) bool {
	if n.DeletionTimestamp != nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == "ToBeDeletedByClusterAutoscaler" {
			return false
		}
	}
	return true
}
