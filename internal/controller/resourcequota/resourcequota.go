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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
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
	// discoveryPeriod is how often new quotable resources are looked for.
	discoveryPeriod = 30 * time.Second
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
}

// Controller is the upstream controller with its discovery loop.
type Controller struct {
	rq       *upstream.Controller
	disc     upstream.NamespacedResourcesFunc
	meta     metadatainformer.SharedInformerFactory
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
	meta := metadatainformer.NewSharedInformerFactory(cfg.Metadata, 0)
	// The quotas' own informer resyncs every period, as kube-controller-manager's does;
	// the manager's shared informers never resync, and asking one for a resync only
	// logs client-go's "doesn't support resyncing" warning.
	quotas := informers.NewSharedInformerFactory(cfg.Client, period)
	factory := ownQuotas{InformerFactory: informerfactory.NewInformerFactory(cfg.Informers, meta), quotas: quotas}
	qc, err := quota.Configuration(generic.ListerFuncForResourceFunc(factory.ForResource))
	if err != nil {
		return nil, fmt.Errorf("quota configuration: %w", err)
	}
	c := &Controller{disc: cfg.Discovery.ServerPreferredNamespacedResources, meta: meta, quotas: quotas, started: make(chan struct{})}
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
		// the monitors add later are started by the monitors themselves.
		c.meta.Start(ctx.Done())
		c.quotas.Start(ctx.Done())
		close(c.started)
	})
	var wg sync.WaitGroup
	wg.Go(func() { c.rq.Run(ctx, workers) })
	wg.Go(func() { c.rq.Sync(ctx, c.disc, discoveryPeriod) })
	wg.Wait()
	c.meta.Shutdown()
	c.quotas.Shutdown()
}

// ownQuotas serves the controller's own quota informer for resourcequotas and the
// manager's informers for everything else. A quota counts itself (the resourcequotas
// resource): counted from the manager's shared informer, which may not yet have seen the
// quota the controller's informer just delivered, its usage would be 0, and stay 0 until
// the full resync, since creates do not replenish usage (admission charges them).
// kube-controller-manager shares one informer for both.
type ownQuotas struct {
	informerfactory.InformerFactory
	quotas informers.SharedInformerFactory
}

func (f ownQuotas) ForResource(r schema.GroupVersionResource) (informers.GenericInformer, error) {
	if r == v1.SchemeGroupVersion.WithResource("resourcequotas") {
		return f.quotas.ForResource(r)
	}
	return f.InformerFactory.ForResource(r)
}
