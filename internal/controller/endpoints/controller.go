package endpoints

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/tranche/tranche/internal/controller/worker"
	"github.com/tranche/tranche/internal/tombstone"
)

// Config is what New needs.
type Config struct {
	// Client writes Endpoints and events.
	Client kubernetes.Interface
	// Informers provides Services, Pods and Endpoints; the caller starts
	// it after New.
	Informers informers.SharedInformerFactory
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
	// Recorder, when not nil, receives Warning events when a write fails.
	Recorder record.EventRecorder
}

// Controller keeps one Endpoints object per Service with a selector.
type Controller struct {
	client   kubernetes.Interface
	logger   *slog.Logger
	recorder record.EventRecorder

	services  corelisters.ServiceLister
	pods      corelisters.PodLister
	endpoints corelisters.EndpointsLister
	synced    []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]

	triggerMu sync.Mutex
	triggers  map[string]triggerState
}

// New builds the controller and registers its event handlers. It panics
// when Client or Informers is missing (a wiring mistake).
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("endpoints.New: Client and Informers are required")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	svcInf := cfg.Informers.Core().V1().Services()
	podInf := cfg.Informers.Core().V1().Pods()
	epInf := cfg.Informers.Core().V1().Endpoints()
	c := &Controller{
		client:    cfg.Client,
		logger:    logger,
		recorder:  cfg.Recorder,
		services:  svcInf.Lister(),
		pods:      podInf.Lister(),
		endpoints: epInf.Lister(),
		synced:    []cache.InformerSynced{svcInf.Informer().HasSynced, podInf.Informer().HasSynced, epInf.Informer().HasSynced},
		queue:     worker.NewQueue("endpoint", nil),
		triggers:  map[string]triggerState{},
	}
	worker.Watch(svcInf.Informer(), c.enqueueObject)
	worker.WatchChanges(podInf.Informer(), func(old, cur any) { c.onPod(tombstone.As[*v1.Pod](old), tombstone.As[*v1.Pod](cur)) })
	mustAdd(epInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.enqueueObject,
	}))
	return c
}

func mustAdd(_ cache.ResourceEventHandlerRegistration, err error) {
	if err != nil {
		panic(fmt.Sprintf("endpoints: adding event handler: %v", err))
	}
}

// Run waits for the caches, queues every existing Endpoints once (to
// remove those whose Service went away while we were down), then syncs
// with the given number of workers until ctx is cancelled; it returns once
// they all returned.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "endpoints", Queue: c.queue, Synced: c.synced, Start: c.queueExisting, Sync: c.sync,
		MaxRetries: worker.DefaultMaxRetries, Logger: c.logger}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

// queueExisting queues every Endpoints object but leader-election records,
// which live in Endpoints without a Service.
func (c *Controller) queueExisting(context.Context) error {
	if all, err := c.endpoints.List(labels.Everything()); err == nil {
		for _, ep := range all {
			if _, ok := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]; !ok {
				c.queue.Add(ep.Namespace + "/" + ep.Name)
			}
		}
	}
	return nil
}

// sync brings the Endpoints of one Service (namespace/name) in line.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("service key %q: %w", key, err)
	}
	svc, err := c.services.Services(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		svc = nil
		c.forgetTrigger(key)
	case err != nil:
		return fmt.Errorf("getting Service %s: %w", key, err)
	}
	existing, err := c.endpoints.Endpoints(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return fmt.Errorf("getting Endpoints %s: %w", key, err)
	}
	if svc == nil {
		// The Service is gone: remove its Endpoints even if our cache
		// missed them, as Kubernetes does.
		err := c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Endpoints %s: %w", key, err)
		}
		return nil
	}
	var pods []*v1.Pod
	var trigger time.Time
	if svc.Spec.Selector != nil && svc.Spec.Type != v1.ServiceTypeExternalName {
		pods, err = c.pods.Pods(ns).List(labels.Set(svc.Spec.Selector).AsSelectorPreValidated())
		if err != nil {
			return fmt.Errorf("listing Pods of Service %s: %w", key, err)
		}
		trigger = c.computeTrigger(key, svc, pods)
	}
	p := reconcile(svc, pods, existing, trigger)
	return c.apply(ctx, svc, p)
}

// apply performs the plan and records a Warning event when it fails.
func (c *Controller) apply(ctx context.Context, svc *v1.Service, p plan) error {
	api := c.client.CoreV1().Endpoints(svc.Namespace)
	switch {
	case p.create != nil:
		_, err := api.Create(ctx, p.create, metav1.CreateOptions{})
		if err == nil || apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			return nil
		}
		c.event(p.create, "FailedToCreateEndpoint", "Failed to create endpoint for service %s/%s: %v", svc.Namespace, svc.Name, err)
		return fmt.Errorf("creating Endpoints %s/%s: %w", svc.Namespace, svc.Name, err)
	case p.update != nil:
		if _, err := api.Update(ctx, p.update, metav1.UpdateOptions{}); err != nil {
			c.event(p.update, "FailedToUpdateEndpoint", "Failed to update endpoint %s/%s: %v", svc.Namespace, svc.Name, err)
			return fmt.Errorf("updating Endpoints %s/%s: %w", svc.Namespace, svc.Name, err)
		}
	}
	return nil
}

func (c *Controller) event(ep *v1.Endpoints, reason, format string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(ep, v1.EventTypeWarning, reason, format, args...)
	}
}

func (c *Controller) enqueueObject(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.logger.Error("cannot compute key", "err", err)
		return
	}
	c.queue.Add(key)
}

// onPod enqueues the Services selecting the pod's old or new labels,
// dropping updates that change nothing an address shows.
func (c *Controller) onPod(old, cur *v1.Pod) {
	if old != nil && cur != nil && (old.ResourceVersion == cur.ResourceVersion || !podChanged(old, cur)) {
		return
	}
	keys := map[string]bool{}
	for _, pod := range []*v1.Pod{old, cur} {
		if pod == nil {
			continue
		}
		services, err := c.services.Services(pod.Namespace).List(labels.Everything())
		if err != nil {
			c.logger.Error("listing services", "namespace", pod.Namespace, "err", err)
			return
		}
		for _, svc := range services {
			if svc.Spec.Selector != nil && labels.SelectorFromValidatedSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
				keys[svc.Namespace+"/"+svc.Name] = true
			}
		}
	}
	for k := range keys {
		c.queue.Add(k)
	}
}

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

// triggerState is what the last sync of a Service saw, to compute the
// last-change-trigger-time annotation as Kubernetes does.
type triggerState struct {
	service time.Time
	pods    map[string]time.Time
}

// computeTrigger returns the earliest pod readiness transition or Service
// creation that changed since the previous sync (the creation time on the
// first sync), zero when none did.
func (c *Controller) computeTrigger(key string, svc *v1.Service, pods []*v1.Pod) time.Time {
	c.triggerMu.Lock()
	defer c.triggerMu.Unlock()
	prev, known := c.triggers[key]
	next := triggerState{service: svc.CreationTimestamp.Time, pods: map[string]time.Time{}}
	var earliest time.Time
	consider := func(at time.Time) {
		if earliest.IsZero() || at.Before(earliest) {
			earliest = at
		}
	}
	for _, pod := range pods {
		for _, cond := range pod.Status.Conditions {
			if cond.Type != v1.PodReady || cond.LastTransitionTime.IsZero() {
				continue
			}
			next.pods[pod.Name] = cond.LastTransitionTime.Time
			if cond.LastTransitionTime.Time.After(prev.pods[pod.Name]) {
				consider(cond.LastTransitionTime.Time)
			}
		}
	}
	if next.service.After(prev.service) {
		consider(next.service)
	}
	c.triggers[key] = next
	if !known {
		return svc.CreationTimestamp.Time
	}
	return earliest
}

func (c *Controller) forgetTrigger(key string) {
	c.triggerMu.Lock()
	defer c.triggerMu.Unlock()
	delete(c.triggers, key)
}
