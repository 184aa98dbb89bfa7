package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	// Informers provides Services, Pods, Nodes and EndpointSlices; the
	// caller starts it after New.
	Informers informers.SharedInformerFactory
	// MaxEndpointsPerSlice bounds the endpoints per slice: 0 means 100,
	// values above 1000 are lowered to 1000.
	MaxEndpointsPerSlice int
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
	// Recorder, when not nil, receives a Warning event on the Service when
	// its slices cannot be written.
	Recorder record.EventRecorder
	// Registerer, when not nil, gets the controller's metrics.
	Registerer prometheus.Registerer
}

// Controller keeps the EndpointSlices of every Service with a selector in
// line with the pods it selects.
type Controller struct {
	client      kubernetes.Interface
	logger      *slog.Logger
	recorder    record.EventRecorder
	maxPerSlice int

	services corelisters.ServiceLister
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	slices   discoverylisters.EndpointSliceLister
	synced   []cache.InformerSynced
	// podIndex and svcIndex are the informers' stores with the indexes of index.go.
	podIndex cache.Indexer
	svcIndex cache.Indexer

	queue    workqueue.TypedRateLimitingInterface[string]
	writes   *writetrack.Tracker
	triggers *triggerTracker
	metrics  *metrics

	statsMu sync.Mutex
	stats   map[string]sliceStats

	// waiting holds the Services whose last sync found the cache behind our own
	// writes: the event of that write queues them at once, instead of the rate
	// limiter's retry (which doubles with each stale sync in a row and, after a
	// burst of them, waits for the shared token bucket: a pod turning Ready right
	// after the previous write waited up to that long to reach the slice).
	waitMu  sync.Mutex
	waiting map[string]bool
}

// New builds the controller and registers its event handlers on
// cfg.Informers. It panics when Client or Informers is missing or when
// the metrics cannot be registered: both are wiring mistakes.
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("endpointslice.New: Client and Informers are required")
	}
	maxPerSlice := cfg.MaxEndpointsPerSlice
	if maxPerSlice <= 0 {
		maxPerSlice = DefaultMaxEndpointsPerSlice
	}
	maxPerSlice = min(maxPerSlice, MaxEndpointsPerSliceLimit)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	svcInf := cfg.Informers.Core().V1().Services()
	podInf := cfg.Informers.Core().V1().Pods()
	nodeInf := cfg.Informers.Core().V1().Nodes()
	sliceInf := cfg.Informers.Discovery().V1().EndpointSlices()
	addIndexers(podInf.Informer(), svcInf.Informer())
	c := &Controller{
		podIndex:    podInf.Informer().GetIndexer(),
		svcIndex:    svcInf.Informer().GetIndexer(),
		client:      cfg.Client,
		logger:      logger,
		recorder:    cfg.Recorder,
		maxPerSlice: maxPerSlice,
		services:    svcInf.Lister(),
		pods:        podInf.Lister(),
		nodes:       nodeInf.Lister(),
		slices:      sliceInf.Lister(),
		queue:       worker.NewQueue("endpointslice", nil),
		writes:      writetrack.New(),
		triggers:    newTriggerTracker(),
		metrics:     newMetrics(cfg.Registerer),
		stats:       map[string]sliceStats{},
		waiting:     map[string]bool{},
	}
	c.synced = []cache.InformerSynced{
		svcInf.Informer().HasSynced, podInf.Informer().HasSynced,
		nodeInf.Informer().HasSynced, sliceInf.Informer().HasSynced,
	}
	worker.Watch(svcInf.Informer(), c.enqueueObject)
	worker.WatchChanges(podInf.Informer(), func(old, cur any) { c.onPod(tombstone.As[*v1.Pod](old), tombstone.As[*v1.Pod](cur)) })
	worker.WatchChanges(nodeInf.Informer(), func(old, cur any) { c.onNode(tombstone.As[*v1.Node](old), tombstone.As[*v1.Node](cur)) })
	mustAdd(sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.onSlice(nil, tombstone.As[*discovery.EndpointSlice](obj)) },
		UpdateFunc: func(old, cur any) {
			c.onSlice(tombstone.As[*discovery.EndpointSlice](old), tombstone.As[*discovery.EndpointSlice](cur))
		},
		DeleteFunc: c.onSliceDelete,
	}))
	return c
}

func mustAdd(_ cache.ResourceEventHandlerRegistration, err error) {
	if err != nil {
		panic(fmt.Sprintf("endpointslice: adding event handler: %v", err))
	}
}

// Run waits for the informer caches, then syncs Services with the given
// number of workers until ctx is cancelled; it returns once they all returned.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "EndpointSlices", Queue: c.queue, Synced: c.synced, Sync: c.syncCounted,
		MaxRetries: worker.DefaultMaxRetries, Expected: isStale, Logger: c.logger}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

// isStale picks the error of a sync that found the cache behind our own writes: an
// expected wait for the informer, not a failure (upstream logs it verbosely too).
func isStale(err error) bool { return errors.Is(err, errStale) }

// syncCounted is sync with its result counted in the syncs metric.
func (c *Controller) syncCounted(ctx context.Context, key string) error {
	err := c.sync(ctx, key)
	switch {
	case err == nil:
		c.metrics.syncs.WithLabelValues("success").Inc()
	case isStale(err):
		c.metrics.syncs.WithLabelValues("stale").Inc()
	default:
		c.metrics.syncs.WithLabelValues("error").Inc()
	}
	return err
}

// sync brings the EndpointSlices of one Service (namespace/name) in line.
func (c *Controller) sync(ctx context.Context, key string) error {
	start := time.Now()
	defer func() { c.metrics.syncDuration.Observe(time.Since(start).Seconds()) }()

	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("service key %q: %w", key, err)
	}
	svc, err := c.services.Services(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		svc = nil
		c.triggers.forget(key)
		// Writes of a deleted Service's slices need not reach the cache first:
		// what is left of them is only deleted.
		c.writes.Forget(key)
	case err != nil:
		return fmt.Errorf("getting Service %s: %w", key, err)
	}
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discovery.LabelServiceName: name,
		discovery.LabelManagedBy:   ControllerName,
	}))
	if err != nil {
		return fmt.Errorf("listing EndpointSlices of Service %s: %w", key, err)
	}
	// Waiting from before the look at the cache: a write's event arriving after it
	// finds the key waiting and queues it.
	c.setWaiting(key, true)
	if c.writes.Stale(key, func(n string) (string, bool) {
		s, err := c.slices.EndpointSlices(ns).Get(n)
		if err != nil {
			return "", false
		}
		return s.ResourceVersion, true
	}) {
		return errStale
	}
	c.setWaiting(key, false)

	var pods []*v1.Pod
	nodes := map[string]*v1.Node{}
	var triggerTime time.Time
	if svc != nil && svc.Spec.Selector != nil && svc.Spec.Type != v1.ServiceTypeExternalName {
		pods, err = c.selectedPods(ns, svc.Spec.Selector)
		if err != nil {
			return fmt.Errorf("listing Pods of Service %s: %w", key, err)
		}
		for _, pod := range pods {
			if _, done := nodes[pod.Spec.NodeName]; done || pod.Spec.NodeName == "" {
				continue
			}
			if node, err := c.nodes.Get(pod.Spec.NodeName); err == nil {
				nodes[node.Name] = node
			}
		}
		triggerTime = c.triggers.compute(key, svc, pods)
	}

	p := reconcile(svc, pods, nodes, existing, c.maxPerSlice, triggerTime)
	applyErr := c.apply(ctx, ns, key, svc, p)
	c.recordStats(key, svc, finalSlices(existing, p))
	if applyErr != nil {
		if svc != nil && c.recorder != nil {
			c.recorder.Eventf(svc, v1.EventTypeWarning, "FailedToUpdateEndpointSlices",
				"Error updating Endpoint Slices for Service %s/%s: %v", svc.Namespace, svc.Name, applyErr)
		}
		return applyErr
	}
	if len(p.skipped) > 0 {
		return fmt.Errorf("skipped Pods %v of Service %s: their Node is not known yet", p.skipped, key)
	}
	return nil
}

// apply performs the plan, carrying on past failures so that one bad slice
// does not hold back the others, and returns every error met.
func (c *Controller) apply(ctx context.Context, ns, key string, svc *v1.Service, p plan) error {
	api := c.client.DiscoveryV1().EndpointSlices(ns)
	var errs []error
	for _, s := range p.create {
		created, err := api.Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			if apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
				// Creates keep failing in a terminating namespace; the
				// namespace controller is removing everything anyway.
				return nil
			}
			errs = append(errs, fmt.Errorf("creating %s for Service %s: %w", describe(s), key, err))
			continue
		}
		c.writes.Wrote(key, created.Name, created.ResourceVersion)
		c.metrics.changes.WithLabelValues("create").Inc()
	}
	for _, s := range p.update {
		updated, err := api.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("updating %s for Service %s: %w", describe(s), key, err))
			continue
		}
		// A write the server found to be a no-op keeps its resourceVersion
		// and produces no watch event: nothing to wait for.
		if updated.ResourceVersion != s.ResourceVersion {
			c.writes.Wrote(key, updated.Name, updated.ResourceVersion)
		}
		c.metrics.changes.WithLabelValues("update").Inc()
	}
	for _, s := range p.delete {
		err := api.Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s for Service %s: %w", describe(s), key, err))
			continue
		}
		if err == nil {
			c.writes.Deleting(key, s.Name)
		}
		c.metrics.changes.WithLabelValues("delete").Inc()
	}
	topology, distribution := "Disabled", ""
	if svc != nil {
		if topologyAnnotationEnabled(svc.Annotations) {
			topology = "Auto"
		} else if hintMode(svc) != (hints{}) {
			distribution = *svc.Spec.TrafficDistribution
		}
	}
	c.metrics.changedPerSync.WithLabelValues(topology, distribution).Observe(float64(len(p.create) + len(p.update) + len(p.delete)))
	if !p.empty() {
		c.logger.Debug("wrote EndpointSlices", "service", key,
			"created", len(p.create), "updated", len(p.update), "deleted", len(p.delete), "errors", len(errs))
	}
	return errors.Join(errs...)
}

// recordStats updates the per-Service figures behind the gauges.
func (c *Controller) recordStats(key string, svc *v1.Service, slices []*discovery.EndpointSlice) {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	if svc == nil {
		delete(c.stats, key)
	} else {
		c.stats[key] = statsOf(slices, c.maxPerSlice)
	}
	var total sliceStats
	for _, st := range c.stats {
		total.endpoints += st.endpoints
		total.desired += st.desired
		total.actual += st.actual
	}
	c.metrics.endpointsDesired.Set(float64(total.endpoints))
	c.metrics.desiredSlices.Set(float64(total.desired))
	c.metrics.numSlices.Set(float64(total.actual))
}

func (c *Controller) enqueueObject(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.logger.Error("cannot compute key", "err", err)
		return
	}
	c.queue.Add(key)
}

// onPod enqueues the Services a pod change can affect: those whose
// selector matches the pod's old or new labels. Updates that change
// nothing an endpoint shows are dropped.
func (c *Controller) onPod(old, cur *v1.Pod) {
	if old != nil && cur != nil {
		if old.ResourceVersion == cur.ResourceVersion || !podChanged(old, cur) {
			return
		}
	}
	keys := map[string]bool{}
	for _, pod := range []*v1.Pod{old, cur} {
		if pod == nil {
			continue
		}
		for _, k := range c.servicesFor(pod.Namespace, pod.Labels) {
			keys[k] = true
		}
	}
	for k := range keys {
		c.queue.Add(k)
	}
}

// podChanged reports changes that can alter a pod's endpoint or the
// Services it belongs to.
func podChanged(old, cur *v1.Pod) bool {
	if !labels.Equals(old.Labels, cur.Labels) ||
		old.Spec.Hostname != cur.Spec.Hostname || old.Spec.Subdomain != cur.Spec.Subdomain ||
		old.Spec.NodeName != cur.Spec.NodeName ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		podReady(old) != podReady(cur) || old.Status.Phase != cur.Status.Phase ||
		old.Status.PodIP != cur.Status.PodIP || len(old.Status.PodIPs) != len(cur.Status.PodIPs) {
		return true
	}
	for i := range old.Status.PodIPs {
		if old.Status.PodIPs[i].IP != cur.Status.PodIPs[i].IP {
			return true
		}
	}
	return false
}

// servicesFor returns the keys of the Services in ns selecting podLabels.
func (c *Controller) servicesFor(ns string, podLabels map[string]string) []string {
	services, err := c.candidateServices(ns, podLabels)
	if err != nil {
		c.logger.Error("listing services", "namespace", ns, "err", err)
		return nil
	}
	var keys []string
	for _, svc := range services {
		// A nil selector selects nothing (not everything).
		if svc.Spec.Selector == nil {
			continue
		}
		if labels.SelectorFromValidatedSet(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
			keys = append(keys, svc.Namespace+"/"+svc.Name)
		}
	}
	return keys
}

// onNode resyncs the Services of pods on a node that appears, disappears
// or changes zone: endpoints carry the zone, and pods on an unknown node
// are held back.
func (c *Controller) onNode(old, cur *v1.Node) {
	var name string
	switch {
	case old != nil && cur != nil:
		if old.Labels[v1.LabelTopologyZone] == cur.Labels[v1.LabelTopologyZone] {
			return
		}
		name = cur.Name
	case cur != nil:
		name = cur.Name
	case old != nil:
		name = old.Name
	default:
		return
	}
	pods, err := c.podsOnNode(name)
	if err != nil {
		c.logger.Error("listing pods", "node", name, "err", err)
		return
	}
	for _, pod := range pods {
		c.onPod(nil, pod)
	}
}

// onSlice resyncs the Service of a managed slice changed by someone else
// (our own writes are recognised and skipped).
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
	if ours && c.writes.Seen(sliceServiceKey(cur), cur.Name, cur.ResourceVersion) && (old == nil || wasOurs) {
		c.wake(sliceServiceKey(cur))
		return
	}
	c.enqueueSlice(cur)
}

// setWaiting records whether key's sync waits for its own writes to reach the cache.
func (c *Controller) setWaiting(key string, waiting bool) {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	if waiting {
		c.waiting[key] = true
	} else {
		delete(c.waiting, key)
	}
}

// wake queues key when a sync of it waits for the own write whose event just arrived.
func (c *Controller) wake(key string) {
	c.waitMu.Lock()
	waiting := c.waiting[key]
	delete(c.waiting, key)
	c.waitMu.Unlock()
	if waiting {
		c.queue.Add(key)
	}
}

// onSliceDelete recreates slices deleted by anyone but us.
func (c *Controller) onSliceDelete(obj any) {
	s := tombstone.As[*discovery.EndpointSlice](obj)
	if s == nil || s.Labels[discovery.LabelManagedBy] != ControllerName {
		return
	}
	if c.writes.Gone(sliceServiceKey(s), s.Name) {
		c.wake(sliceServiceKey(s))
		return
	}
	c.enqueueSlice(s)
}

func (c *Controller) enqueueSlice(s *discovery.EndpointSlice) {
	if s.Labels[discovery.LabelServiceName] == "" {
		return
	}
	c.queue.Add(sliceServiceKey(s))
}

func sliceServiceKey(s *discovery.EndpointSlice) string {
	return s.Namespace + "/" + s.Labels[discovery.LabelServiceName]
}
