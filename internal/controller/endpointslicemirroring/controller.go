package endpointslicemirroring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/tranche/tranche/internal/controller/worker"
	"github.com/tranche/tranche/internal/controller/writetrack"
	"github.com/tranche/tranche/internal/tombstone"
)

// errStale reports that our own writes are not in the informer cache yet.
var errStale = errors.New("EndpointSlice informer cache is out of date")

// Config is what New needs.
type Config struct {
	// Client writes EndpointSlices and events.
	Client kubernetes.Interface
	// Informers provides Endpoints, Services and EndpointSlices; the
	// caller starts it after New.
	Informers informers.SharedInformerFactory
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
	// Recorder, when not nil, receives Warning events on Endpoints whose
	// addresses could not all be mirrored.
	Recorder record.EventRecorder
}

// Controller mirrors Endpoints of selector-less Services into EndpointSlices.
type Controller struct {
	client   kubernetes.Interface
	logger   *slog.Logger
	recorder record.EventRecorder

	endpoints corelisters.EndpointsLister
	services  corelisters.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]

	// writes holds, per Endpoints key, the slice writes the informer has
	// not shown yet.
	writes *writetrack.Tracker
}

// New builds the controller and registers its event handlers. It panics
// when Client or Informers is missing (a wiring mistake).
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("endpointslicemirroring.New: Client and Informers are required")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	epInf := cfg.Informers.Core().V1().Endpoints()
	svcInf := cfg.Informers.Core().V1().Services()
	sliceInf := cfg.Informers.Discovery().V1().EndpointSlices()
	c := &Controller{
		client:    cfg.Client,
		logger:    logger,
		recorder:  cfg.Recorder,
		endpoints: epInf.Lister(),
		services:  svcInf.Lister(),
		slices:    sliceInf.Lister(),
		synced:    []cache.InformerSynced{epInf.Informer().HasSynced, svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced},
		queue:     worker.NewQueue("endpoint_slice_mirroring", nil),
		writes:    writetrack.New(),
	}
	mustAdd(epInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, cur any) {
			o, n := tombstone.As[*v1.Endpoints](old), tombstone.As[*v1.Endpoints](cur)
			if shouldMirror(o) || shouldMirror(n) {
				c.enqueue(cur)
			}
		},
		DeleteFunc: c.enqueue,
	}))
	mustAdd(svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, cur any) {
			o, n := tombstone.As[*v1.Service](old), tombstone.As[*v1.Service](cur)
			if o != nil && n != nil && (o.Spec.Selector == nil) != (n.Spec.Selector == nil) {
				c.enqueue(cur)
			}
		},
		DeleteFunc: c.enqueue,
	}))
	mustAdd(sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.onSlice(nil, tombstone.As[*discovery.EndpointSlice](obj)) },
		UpdateFunc: func(old, cur any) {
			c.onSlice(tombstone.As[*discovery.EndpointSlice](old), tombstone.As[*discovery.EndpointSlice](cur))
		},
		DeleteFunc: func(obj any) { c.onSliceDelete(tombstone.As[*discovery.EndpointSlice](obj)) },
	}))
	return c
}

func mustAdd(_ cache.ResourceEventHandlerRegistration, err error) {
	if err != nil {
		panic(fmt.Sprintf("endpointslicemirroring: adding event handler: %v", err))
	}
}

// Run waits for the caches, then syncs with the given number of workers
// until ctx is cancelled; it returns once they all returned.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "EndpointSlices mirrored from Endpoints", Queue: c.queue, Synced: c.synced, Sync: c.sync,
		MaxRetries: worker.DefaultMaxRetries, Expected: func(err error) bool { return errors.Is(err, errStale) }, Logger: c.logger}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

// sync mirrors one Endpoints object (namespace/name).
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("endpoints key %q: %w", key, err)
	}
	ep, err := c.endpoints.Endpoints(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting Endpoints %s: %w", key, err)
	}
	if err != nil {
		ep = nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting Service %s: %w", key, err)
	}
	if err != nil {
		svc = nil
	}
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discovery.LabelServiceName: name,
		discovery.LabelManagedBy:   ControllerName,
	}))
	if err != nil {
		return fmt.Errorf("listing EndpointSlices of %s: %w", key, err)
	}
	if c.writes.Stale(key, func(n string) (string, bool) {
		s, err := c.slices.EndpointSlices(ns).Get(n)
		if err != nil {
			return "", false
		}
		return s.ResourceVersion, true
	}) {
		return errStale
	}
	p := reconcile(ep, svc, existing, MaxEndpointsPerSubset)
	if ep != nil && c.recorder != nil {
		if p.invalid > 0 {
			c.recorder.Eventf(ep, v1.EventTypeWarning, "InvalidIPAddress",
				"Skipped %d invalid IP addresses when mirroring to EndpointSlices", p.invalid)
		}
		if p.skipped > p.invalid {
			c.recorder.Eventf(ep, v1.EventTypeWarning, "TooManyAddressesToMirror",
				"A max of %d addresses can be mirrored to EndpointSlices per Endpoints subset. %d addresses were skipped", MaxEndpointsPerSubset, p.skipped)
		}
	}
	return c.apply(ctx, ns, key, ep, p)
}

// apply performs the plan, carrying on past failures, and returns every
// error met.
func (c *Controller) apply(ctx context.Context, ns, key string, ep *v1.Endpoints, p plan) error {
	api := c.client.DiscoveryV1().EndpointSlices(ns)
	var errs []error
	if ep == nil || ep.DeletionTimestamp == nil {
		for _, s := range p.create {
			created, err := api.Create(ctx, s, metav1.CreateOptions{})
			if err != nil {
				if apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
					return nil
				}
				errs = append(errs, fmt.Errorf("creating EndpointSlice for Endpoints %s: %w", key, err))
				continue
			}
			c.writes.Wrote(key, created.Name, created.ResourceVersion)
		}
	}
	for _, s := range p.update {
		updated, err := api.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("updating EndpointSlice %s/%s for Endpoints %s: %w", ns, s.Name, key, err))
			continue
		}
		if updated.ResourceVersion != s.ResourceVersion {
			c.writes.Wrote(key, updated.Name, updated.ResourceVersion)
		}
	}
	for _, s := range p.delete {
		err := api.Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting EndpointSlice %s/%s for Endpoints %s: %w", ns, s.Name, key, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.logger.Error("cannot compute key", "err", err)
		return
	}
	c.queue.Add(key)
}

// onSlice resyncs the Endpoints of a mirrored slice changed by someone else.
func (c *Controller) onSlice(old, cur *discovery.EndpointSlice) {
	if cur == nil || (old != nil && old.ResourceVersion == cur.ResourceVersion) {
		return
	}
	if old != nil && old.Labels[discovery.LabelServiceName] != cur.Labels[discovery.LabelServiceName] {
		c.enqueueSlice(old)
		c.enqueueSlice(cur)
		return
	}
	ours := cur.Labels[discovery.LabelManagedBy] == ControllerName
	wasOurs := old != nil && old.Labels[discovery.LabelManagedBy] == ControllerName
	if !ours && !wasOurs {
		return
	}
	if ours && c.writes.Seen(sliceKey(cur), cur.Name, cur.ResourceVersion) && (old == nil || wasOurs) {
		return
	}
	c.enqueueSlice(cur)
}

// onSliceDelete resyncs when a mirrored slice disappears, so that one
// deleted by hand comes back.
func (c *Controller) onSliceDelete(s *discovery.EndpointSlice) {
	if s == nil || s.Labels[discovery.LabelManagedBy] != ControllerName {
		return
	}
	c.writes.Gone(sliceKey(s), s.Name)
	c.enqueueSlice(s)
}

func (c *Controller) enqueueSlice(s *discovery.EndpointSlice) {
	if s.Labels[discovery.LabelServiceName] != "" {
		c.queue.Add(sliceKey(s))
	}
}

func sliceKey(s *discovery.EndpointSlice) string {
	return s.Namespace + "/" + s.Labels[discovery.LabelServiceName]
}
