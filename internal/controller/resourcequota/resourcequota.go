// Package resourcequota runs kube-controller-manager's resource quota controller
// (k8s.io/kubernetes/pkg/controller/resourcequota): it recomputes every quota's
// status.used from the objects that exist, on quota creates and spec updates, when a
// tracked object is deleted or changes usage (a monitor per quotable resource found
// through discovery, so count/<resource>.<group> works for any served resource), and
// in a full resync every five minutes; status.hard mirrors spec.hard.
package resourcequota

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/kubernetes/pkg/controller"
	upstream "k8s.io/kubernetes/pkg/controller/resourcequota"
	"k8s.io/kubernetes/pkg/quota/v1/install"

	"github.com/tranche/tranche/internal/quota"
)

// kube-controller-manager's defaults.
const (
	// DefaultSyncPeriod is --resource-quota-sync-period: the full recalculation.
	DefaultSyncPeriod = 5 * time.Minute
	// DefaultDiscoveryPeriod is how often quotable resources are looked for again.
	DefaultDiscoveryPeriod = 30 * time.Second
	// workers is --concurrent-resource-quota-syncs.
	workers = 5
)

// Config is what the controller needs.
type Config struct {
	Client kubernetes.Interface
	// Informers is the manager's shared factory (the typed resources).
	Informers informers.SharedInformerFactory
	// Metadata and Discovery serve the monitors of resources without typed informers.
	Metadata  metadata.Interface
	Discovery discovery.DiscoveryInterface
	// SyncPeriod is the full recalculation period; 0 means DefaultSyncPeriod.
	SyncPeriod time.Duration
	// DiscoveryPeriod is how often resources are re-discovered, so that monitors start
	// for new ones and stop for those gone; 0 means DefaultDiscoveryPeriod.
	DiscoveryPeriod time.Duration
}

// Controller is the upstream controller with its discovery loop.
type Controller struct {
	rq       *upstream.Controller
	disc     upstream.NamespacedResourcesFunc
	period   time.Duration // of discovery
	quotas   informers.SharedInformerFactory
	started  chan struct{}
	startOne sync.Once
}

// New builds the controller; its informers are registered on cfg.Informers, which the
// caller starts before Run.
func New(ctx context.Context, cfg Config) (*Controller, error) {
	period := cfg.SyncPeriod
	if period == 0 {
		period = DefaultSyncPeriod
	}
	discoveryPeriod := cfg.DiscoveryPeriod
	if discoveryPeriod == 0 {
		discoveryPeriod = DefaultDiscoveryPeriod
	}
	// The quotas' own informer resyncs every period, as kube-controller-manager's does;
	// the manager's shared informers never resync, and asking one for a resync only
	// logs client-go's "doesn't support resyncing" warning.
	quotas := informers.NewSharedInformerFactory(cfg.Client, period)
	factory := &monitorInformers{typed: cfg.Informers, quotas: quotas, metadata: cfg.Metadata, own: map[schema.GroupVersionResource]*stoppable{}}
	qc, err := quota.Configuration(generic.ListerFuncForResourceFunc(factory.ForResource))
	if err != nil {
		return nil, fmt.Errorf("quota configuration: %w", err)
	}
	c := &Controller{disc: cfg.Discovery.ServerPreferredNamespacedResources, period: discoveryPeriod, quotas: quotas, started: make(chan struct{})}
	c.rq, err = upstream.NewController(ctx, &upstream.ControllerOptions{
		QuotaClient:           cfg.Client.CoreV1(),
		ResourceQuotaInformer: quotas.Core().V1().ResourceQuotas(),
		ResyncPeriod:          controller.StaticResyncPeriodFunc(period),
		Registry:              generic.NewRegistry(qc.Evaluators()),
		DiscoveryFunc:         c.disc,
		IgnoredResourcesFunc:  qc.IgnoredResources,
		InformersStarted:      c.started,
		InformerFactory:       factory,
		// No monitor resync (kube-controller-manager's --min-resync-period): the
		// monitors' informers are the manager's and a metadata factory without
		// resyncs; the full recalculation every period covers what one would.
		ReplenishmentResyncPeriod: controller.StaticResyncPeriodFunc(0),
		UpdateFilter:              install.DefaultUpdateFilter(),
	})
	if err != nil {
		return nil, fmt.Errorf("resource quota controller: %w", err)
	}
	return c, nil
}

// Run runs the controller until ctx ends and returns once its goroutines have.
func (c *Controller) Run(ctx context.Context) {
	c.startOne.Do(func() {
		// The manager started the shared informers before Run; the metadata ones
		// are run by the monitors themselves.
		c.quotas.Start(ctx.Done())
		close(c.started)
	})
	var wg sync.WaitGroup
	wg.Go(func() { c.rq.Run(ctx, workers) })
	wg.Go(func() { c.rq.Sync(ctx, c.disc, c.period) })
	wg.Wait()
	c.quotas.Shutdown()
}

// monitorInformers is the controller's informer factory. It serves the controller's own
// quota informer for resourcequotas and the manager's typed informers for the built-in
// resources. A quota counts itself (the resourcequotas resource): counted from the
// manager's shared informer, which may not yet have seen the quota the controller's
// informer just delivered, its usage would be 0, and stay 0 until the full resync, since
// creates do not replenish usage (admission charges them). kube-controller-manager
// shares one informer for both.
//
// Every other resource (custom resources, aggregated APIs) gets a metadata informer of
// its own that its quota monitor runs and stops. kube-controller-manager takes them from
// a shared factory, whose informers cannot be stopped: once a CustomResourceDefinition
// is deleted, its informer goes on failing to list the resource, logging so, for as long
// as the controller manager runs (kubernetes#79610).
type monitorInformers struct {
	typed    informers.SharedInformerFactory
	quotas   informers.SharedInformerFactory
	metadata metadata.Interface

	mu  sync.Mutex
	own map[schema.GroupVersionResource]*stoppable
}

var _ informerfactory.InformerFactory = (*monitorInformers)(nil)

func (f *monitorInformers) ForResource(r schema.GroupVersionResource) (informers.GenericInformer, error) {
	if r == v1.SchemeGroupVersion.WithResource("resourcequotas") {
		return f.quotas.ForResource(r)
	}
	if inf, err := f.typed.ForResource(r); err == nil {
		return inf, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.own[r]; ok {
		return s, nil
	}
	s := &stoppable{GenericInformer: metadatainformer.NewFilteredMetadataInformer(f.metadata, r, metav1.NamespaceAll, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil)}
	s.stopped = func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.own[r] == s {
			delete(f.own, r)
		}
	}
	f.own[r] = s
	return s, nil
}

// Start starts the shared informers asked for so far; the monitors run the others.
func (f *monitorInformers) Start(stop <-chan struct{}) {
	f.typed.Start(stop)
	f.quotas.Start(stop)
}

// stoppable is a metadata informer run by the controller its Informer hands out (the
// quota monitor's), until that controller is stopped; the factory then forgets it, so
// that a resource served again gets a fresh informer (a stopped one cannot run again).
type stoppable struct {
	informers.GenericInformer
	stopped func()
}

func (s *stoppable) Informer() cache.SharedIndexInformer {
	return runsItself{SharedIndexInformer: s.GenericInformer.Informer(), stopped: s.stopped}
}

// runsItself is an informer whose controller runs it (a shared informer's controller
// does nothing: its factory runs it).
type runsItself struct {
	cache.SharedIndexInformer
	stopped func()
}

func (r runsItself) GetController() cache.Controller { return informerController(r) }

// informerController runs its informer until stopped.
type informerController runsItself

func (c informerController) Run(stop <-chan struct{}) {
	defer c.stopped()
	c.SharedIndexInformer.Run(stop)
}

func (c informerController) RunWithContext(ctx context.Context) {
	defer c.stopped()
	c.SharedIndexInformer.RunWithContext(ctx)
}
