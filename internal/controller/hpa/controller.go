// Package hpa implements the HorizontalPodAutoscaler controller: every sync period it reads
// each HPA's target through the scale subresource, the pods the target selects and their
// usage from the resource metrics API (metrics.k8s.io), computes the size Kubernetes'
// algorithm asks for (usage against requests, tolerance, missing and unready pods,
// min/max, stabilization windows and rate policies), writes the scale and reports status,
// conditions and events in upstream's words. Each sync reads a snapshot, decides (pure,
// compute.go) and applies.
package hpa

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/controller/worker"
)

// Defaults of kube-controller-manager's HPA settings.
const (
	DefaultSyncPeriod              = 15 * time.Second
	DefaultDownscaleStabilization  = 5 * time.Minute
	DefaultTolerance               = 0.1
	DefaultCPUInitializationPeriod = 5 * time.Minute
	DefaultInitialReadinessDelay   = 30 * time.Second
)

// Config is what New needs. Zero durations and tolerance take kube-controller-manager's
// defaults.
type Config struct {
	// Client reads and writes scale subresources and writes HPA status.
	Client kubernetes.Interface
	// Informers provides HPAs (autoscaling/v2) and pods; the caller starts it after New.
	Informers informers.SharedInformerFactory
	// Metrics reads the resource metrics API. Required.
	Metrics MetricsClient
	// External reads the external metrics API; nil: External metrics fail as on a
	// cluster that serves none.
	External ExternalMetricsClient
	// Scales reads and writes the scale subresource of targets of other kinds than the
	// built-in scalable ones (custom resources with a scale subresource), whose resource
	// Mapper names; either nil: such targets fail as an unknown kind.
	Scales scale.ScalesGetter
	Mapper meta.RESTMapper
	// Recorder receives SuccessfulRescale, FailedGetResourceMetric, ... events; nil drops them.
	Recorder record.EventRecorder
	// Clock times syncs, stabilization windows and conditions; nil means the real clock.
	Clock clock.WithTicker
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger

	// SyncPeriod is how often each HPA is synced (--horizontal-pod-autoscaler-sync-period).
	SyncPeriod time.Duration
	// DownscaleStabilization is the scale-down stabilization window of HPAs that do not set
	// one (--horizontal-pod-autoscaler-downscale-stabilization).
	DownscaleStabilization time.Duration
	// Tolerance is how far the usage ratio may stray from 1 before scaling.
	Tolerance float64
	// CPUInitializationPeriod and InitialReadinessDelay decide which CPU samples of
	// starting pods are trusted.
	CPUInitializationPeriod time.Duration
	InitialReadinessDelay   time.Duration
}

// Controller autoscales the targets of HorizontalPodAutoscalers. Create it with New and
// start it with Run.
type Controller struct {
	client   kubernetes.Interface
	scales   scale.ScalesGetter
	mapper   meta.RESTMapper
	metrics  MetricsClient
	external ExternalMetricsClient
	recorder record.EventRecorder
	clock    clock.WithTicker
	log      *slog.Logger
	period   time.Duration
	settings settings

	hpaLister autoscalinglisters.HorizontalPodAutoscalerLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// histories and selectors are per HPA key ("ns/name"): what past syncs decided, and
	// the selector each HPA's target had at its last sync (to find pods two HPAs fight over).
	histories map[string]*history
	selectors map[string]labels.Selector
}

// New builds the controller and registers its event handlers. It panics when Client,
// Informers or Metrics is missing, a wiring mistake.
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Metrics == nil {
		panic("hpa.New: Client, Informers and Metrics are required")
	}
	log, clk, rec := worker.Defaults(cfg.Logger, cfg.Clock, cfg.Recorder)
	c := &Controller{
		client: cfg.Client, scales: cfg.Scales, mapper: cfg.Mapper, metrics: cfg.Metrics, external: cfg.External, recorder: rec, clock: clk, log: log,
		period: orDuration(cfg.SyncPeriod, DefaultSyncPeriod),
		settings: settings{
			tolerance:              cfg.Tolerance,
			downscaleStabilization: orDuration(cfg.DownscaleStabilization, DefaultDownscaleStabilization),
			readiness: readiness{
				cpuInitializationPeriod: orDuration(cfg.CPUInitializationPeriod, DefaultCPUInitializationPeriod),
				initialReadinessDelay:   orDuration(cfg.InitialReadinessDelay, DefaultInitialReadinessDelay),
			},
		},
		histories: map[string]*history{},
		selectors: map[string]labels.Selector{},
	}
	if c.settings.tolerance == 0 {
		c.settings.tolerance = DefaultTolerance
	}
	// Every HPA comes back once per period, however often it changes: a fixed delay, as
	// kube-controller-manager's HPA queue has.
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig[string](fixedInterval(c.period),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "horizontalpodautoscaler", Clock: clk})

	hpas := cfg.Informers.Autoscaling().V2().HorizontalPodAutoscalers()
	pods := cfg.Informers.Core().V1().Pods()
	c.hpaLister, c.podLister = hpas.Lister(), pods.Lister()
	c.synced = []cache.InformerSynced{hpas.Informer().HasSynced, pods.Informer().HasSynced}
	worker.WatchChanges(hpas.Informer(), c.hpaChanged)
	return c
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Run waits for the caches, runs workers syncs in parallel and blocks until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "HorizontalPodAutoscaler", Queue: c.queue, Synced: c.synced, Sync: c.sync, MaxRetries: math.MaxInt, Logger: c.log}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled: the
// controller manager starts Run once they are.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

// hpaChanged syncs a new HPA or a changed spec at once; a status write (the controller's
// own) waits for the period, or the controller would chase its own writes.
func (c *Controller) hpaChanged(old, cur any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(cur)
	if cur == nil {
		key, err = cache.DeletionHandlingMetaNamespaceKeyFunc(old)
	}
	if err != nil {
		return
	}
	oldHPA, _ := old.(*autoscalingv2.HorizontalPodAutoscaler)
	curHPA, _ := cur.(*autoscalingv2.HorizontalPodAutoscaler)
	switch {
	case cur == nil:
		c.queue.Forget(key)
		c.forget(key)
	case oldHPA == nil || curHPA == nil || oldHPA.Generation != curHPA.Generation:
		c.queue.Add(key)
	default:
		c.queue.AddRateLimited(key)
	}
}

func (c *Controller) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.histories, key)
	delete(c.selectors, key)
}

// sync reconciles one HPA and schedules its next sync a period later.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	hpa, err := c.hpaLister.HorizontalPodAutoscalers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	defer c.queue.AddRateLimited(key)
	if err := c.reconcile(ctx, key, hpa.DeepCopy()); err != nil {
		// Conditions and events already tell the user; the log is for debugging.
		c.log.Debug("autoscaling failed", "hpa", key, "err", err)
	}
	return nil
}

// reconcile reads the snapshot, decides and applies. Errors are reported on the HPA
// (conditions, events) and returned for the log.
func (c *Controller) reconcile(ctx context.Context, key string, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	original := hpa.Status.DeepCopy()
	ref := hpa.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)
	now := c.clock.Now()

	target, err := c.scaleTarget(ref)
	var scale *autoscalingv1.Scale
	if err == nil {
		scale, err = target.get(ctx, hpa.Namespace, ref.Name)
	}
	if err != nil {
		c.recorder.Event(hpa, v1.EventTypeWarning, "FailedGetScale", err.Error())
		setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionFalse, "FailedGetScale",
			"the HPA controller was unable to get the target's current scale: "+err.Error(), now)
		c.writeStatus(ctx, original, hpa)
		return fmt.Errorf("failed to query scale subresource for %s: %w", reference, err)
	}

	snap := snapshot{hpa: hpa, scale: scale, now: now}
	var selector labels.Selector
	selector, snap.selectorErr = c.checkSelector(key, hpa, scale.Status.Selector)
	if snap.selectorErr == nil {
		if snap.pods, err = c.podLister.Pods(hpa.Namespace).List(selector); err != nil {
			return err
		}
		if needsPodMetrics(hpa) {
			snap.podMetrics, snap.metricsErr = fetchPodMetrics(ctx, c.metrics, hpa.Namespace, selector)
		}
	}
	snap.external = fetchExternalMetrics(ctx, c.external, hpa)

	c.mu.Lock()
	h := c.histories[key]
	if h == nil {
		h = &history{}
		c.histories[key] = h
	}
	d := decide(snap, h, c.settings)
	c.mu.Unlock()

	for _, e := range d.events {
		c.recorder.Event(hpa, e.kind, e.reason, e.message)
	}
	if d.failed != nil {
		setStatus(hpa, d.current, hpa.Status.DesiredReplicas, d.statuses, false, now)
		c.writeStatus(ctx, original, hpa)
		return fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %w", reference, d.failed)
	}
	if d.rescale {
		if err := c.writeScale(ctx, hpa.Namespace, ref.Name, target, scale, d.desired); err != nil {
			c.recorder.Eventf(hpa, v1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", d.desired, d.reason, err)
			setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionFalse, "FailedUpdateScale",
				"the HPA controller was unable to update the target scale: "+err.Error(), now)
			setStatus(hpa, d.current, hpa.Status.DesiredReplicas, d.statuses, false, now)
			c.writeStatus(ctx, original, hpa)
			return fmt.Errorf("failed to rescale %s: %w", reference, err)
		}
		setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "SucceededRescale",
			fmt.Sprintf("the HPA controller was able to update the target scale to %d", d.desired), now)
		c.recorder.Eventf(hpa, v1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", d.desired, d.reason)
		c.mu.Lock()
		h.recordScale(hpa.Spec.Behavior, d.current, d.desired, now)
		c.mu.Unlock()
		minReplicas := int32(1)
		if hpa.Spec.MinReplicas != nil {
			minReplicas = *hpa.Spec.MinReplicas
		}
		if d.current > 0 && d.desired == 0 && minReplicas == 0 && hasObjectOrExternalMetrics(hpa) {
			setCondition(hpa, autoscalingv2.ScaledToZero, v1.ConditionTrue, "ScaledToZero", "the HPA controller scaled the workload to zero", now)
		} else {
			setCondition(hpa, autoscalingv2.ScaledToZero, v1.ConditionFalse, "NotScaledToZero", "the HPA controller did not scale the workload to zero", now)
		}
		c.log.Info("rescaled", "hpa", key, "from", d.current, "to", d.desired, "reason", d.reason)
	} else {
		d.desired = d.current
	}
	setStatus(hpa, d.current, d.desired, d.statuses, d.rescale, now)
	if err := c.writeStatus(ctx, original, hpa); err != nil {
		return err
	}
	return d.partial
}

// writeScale sets the target's replicas, re-reading the scale on a conflict.
func (c *Controller) writeScale(ctx context.Context, ns, name string, t scaleTarget, scale *autoscalingv1.Scale, replicas int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale.Spec.Replicas = replicas
		_, err := t.update(ctx, ns, name, scale)
		if err == nil {
			return nil
		}
		if latest, getErr := t.get(ctx, ns, name); getErr == nil {
			scale = latest
		}
		return err
	})
}

// writeStatus writes hpa's status when it differs from what was read.
func (c *Controller) writeStatus(ctx context.Context, original *autoscalingv2.HorizontalPodAutoscalerStatus, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if equality.Semantic.DeepEqual(original, &hpa.Status) {
		return nil
	}
	if _, err := c.client.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa, metav1.UpdateOptions{}); err != nil {
		c.recorder.Event(hpa, v1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %w", hpa.Name, err)
	}
	return nil
}

// checkSelector parses the scale's selector, remembers it for key, and refuses an empty
// or unparsable one, or one whose pods another HPA also scales.
func (c *Controller) checkSelector(key string, hpa *autoscalingv2.HorizontalPodAutoscaler, selector string) (labels.Selector, *selectorProblem) {
	if selector == "" {
		return nil, &selectorProblem{"SelectorRequired", "selector is required", "InvalidSelector", "the HPA target's scale is missing a selector"}
	}
	parsed, err := labels.Parse(selector)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		return nil, &selectorProblem{"InvalidSelector", msg, "InvalidSelector", msg}
	}
	pods, err := c.podLister.Pods(hpa.Namespace).List(parsed)
	if err != nil {
		pods = nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.selectors[key] = parsed
	var owners []string
	for other, sel := range c.selectors {
		if !strings.HasPrefix(other, hpa.Namespace+"/") {
			continue
		}
		for _, p := range pods {
			if sel.Matches(labels.Set(p.Labels)) {
				owners = append(owners, other)
				break
			}
		}
	}
	if len(owners) > 1 {
		sort.Strings(owners)
		msg := fmt.Sprintf("pods by selector %v are controlled by more than one HPA (e.g. %v)", selector, owners[:2])
		return nil, &selectorProblem{"AmbiguousSelector", msg, "AmbiguousSelector", msg}
	}
	return parsed, nil
}

// scaleTarget reads and writes one kind's scale subresource.
type scaleTarget struct {
	get    func(ctx context.Context, ns, name string) (*autoscalingv1.Scale, error)
	update func(ctx context.Context, ns, name string, s *autoscalingv1.Scale) (*autoscalingv1.Scale, error)
}

// scaleTarget finds the scale subresource of ref's kind: the built-in scalable kinds
// through the clientset, any other (a custom resource's) through the scale client and
// the RESTMapper, as kube-controller-manager's HPA controller reads them all; a kind
// that has no resource fails as upstream.
func (c *Controller) scaleTarget(ref autoscalingv2.CrossVersionObjectReference) (scaleTarget, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return scaleTarget{}, err
	}
	get, update := metav1.GetOptions{}, metav1.UpdateOptions{}
	switch (schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		return scaleTarget{
			get: func(ctx context.Context, ns, n string) (*autoscalingv1.Scale, error) {
				return c.client.AppsV1().Deployments(ns).GetScale(ctx, n, get)
			},
			update: func(ctx context.Context, ns, n string, s *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
				return c.client.AppsV1().Deployments(ns).UpdateScale(ctx, n, s, update)
			},
		}, nil
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		return scaleTarget{
			get: func(ctx context.Context, ns, n string) (*autoscalingv1.Scale, error) {
				return c.client.AppsV1().ReplicaSets(ns).GetScale(ctx, n, get)
			},
			update: func(ctx context.Context, ns, n string, s *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
				return c.client.AppsV1().ReplicaSets(ns).UpdateScale(ctx, n, s, update)
			},
		}, nil
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		return scaleTarget{
			get: func(ctx context.Context, ns, n string) (*autoscalingv1.Scale, error) {
				return c.client.AppsV1().StatefulSets(ns).GetScale(ctx, n, get)
			},
			update: func(ctx context.Context, ns, n string, s *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
				return c.client.AppsV1().StatefulSets(ns).UpdateScale(ctx, n, s, update)
			},
		}, nil
	case schema.GroupKind{Kind: "ReplicationController"}:
		return scaleTarget{
			get: func(ctx context.Context, ns, n string) (*autoscalingv1.Scale, error) {
				return c.client.CoreV1().ReplicationControllers(ns).GetScale(ctx, n, get)
			},
			update: func(ctx context.Context, ns, n string, s *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
				return c.client.CoreV1().ReplicationControllers(ns).UpdateScale(ctx, n, s, update)
			},
		}, nil
	}
	if c.scales == nil || c.mapper == nil {
		return scaleTarget{}, &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: gv.Group, Kind: ref.Kind}}
	}
	m, err := c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
	if err != nil {
		return scaleTarget{}, err
	}
	gr := m.Resource.GroupResource()
	return scaleTarget{
		get: func(ctx context.Context, ns, n string) (*autoscalingv1.Scale, error) {
			return c.scales.Scales(ns).Get(ctx, gr, n, get)
		},
		update: func(ctx context.Context, ns, _ string, s *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
			return c.scales.Scales(ns).Update(ctx, gr, s, update)
		},
	}, nil
}

// fixedInterval delays every item by the same period, whatever its history.
type fixedInterval time.Duration

func (f fixedInterval) When(string) time.Duration { return time.Duration(f) }
func (fixedInterval) NumRequeues(string) int      { return 1 }
func (fixedInterval) Forget(string)               {}
