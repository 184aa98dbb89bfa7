// Package netpolwatch warns about NetworkPolicies that select nothing: a policy whose
// podSelector matches no pod of its namespace protects nothing, which is most often a
// typo in a label. The controller records one Warning Event, reason NoPodsSelected, each
// time a policy's selection turns empty (not on every resync), and nothing when it selects
// pods again. Kubernetes has no such controller; its event follows kube-controller-
// manager's conventions.
package netpolwatch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/controller/worker"
)

// ReasonNoPodsSelected is the reason of the Warning Event on a policy that selects no pod.
const ReasonNoPodsSelected = "NoPodsSelected"

// DefaultGrace is how long a policy must select nothing before it is reported: a policy
// applied together with its workload usually arrives a moment before the pods do.
const DefaultGrace = 5 * time.Second

// Config is what New needs.
type Config struct {
	// Informers provides NetworkPolicies and Pods; the caller starts it after New.
	Informers informers.SharedInformerFactory
	// Recorder receives the Warning Events; nil drops them.
	Recorder record.EventRecorder
	// Clock times the grace period; nil means the real clock.
	Clock clock.WithTicker
	// Grace is how long a selection must stay empty before it is reported; 0 means
	// DefaultGrace.
	Grace  time.Duration
	Logger *slog.Logger
}

// Controller records NoPodsSelected events. Create it with New and start it with Run.
type Controller struct {
	policies networkinglisters.NetworkPolicyLister
	// pods is the pod cache indexed by namespace; a sync stops at the first match.
	pods     cache.Indexer
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder
	clock    clock.WithTicker
	grace    time.Duration
	log      *slog.Logger

	mu sync.Mutex
	// emptySince is when each policy was first seen selecting nothing, since it last
	// selected a pod; reported marks the policies whose event was recorded.
	emptySince map[string]time.Time
	reported   map[string]bool
}

// New wires the controller to the factory's NetworkPolicy and Pod informers. It panics
// when Informers is missing, a wiring mistake.
func New(cfg Config) *Controller {
	if cfg.Informers == nil {
		panic("netpolwatch.New: Informers is required")
	}
	log, clk, rec := worker.Defaults(cfg.Logger, cfg.Clock, cfg.Recorder)
	grace := cfg.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	npInf := cfg.Informers.Networking().V1().NetworkPolicies()
	podInf := cfg.Informers.Core().V1().Pods()
	c := &Controller{
		policies: npInf.Lister(), pods: podInf.Informer().GetIndexer(),
		synced:   []cache.InformerSynced{npInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue:    worker.NewQueue("networkpolicy_watch", clk),
		recorder: rec, clock: clk, grace: grace, log: log,
		emptySince: map[string]time.Time{},
		reported:   map[string]bool{},
	}
	worker.Watch(npInf.Informer(), func(obj any) { worker.Enqueue(c.queue, obj) })
	worker.WatchChanges(podInf.Informer(), c.podChanged)
	return c
}

// podChanged requeues the policies of the pod's namespace whose selection the event can
// change: those selecting the pod as it was (it may have been their last) or as it is (it
// may be their first). Only an add, a delete, a label change or the pod terminating
// changes a selection.
func (c *Controller) podChanged(old, cur any) {
	oldPod, curPod, pod := worker.Pods(old, cur)
	if pod == nil {
		return
	}
	if oldPod != nil && curPod != nil && labels.Equals(oldPod.Labels, curPod.Labels) && counts(oldPod) == counts(curPod) {
		return
	}
	policies, err := c.policies.NetworkPolicies(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, np := range policies {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			continue
		}
		if (oldPod != nil && counts(oldPod) && sel.Matches(labels.Set(oldPod.Labels))) ||
			(curPod != nil && counts(curPod) && sel.Matches(labels.Set(curPod.Labels))) {
			worker.Enqueue(c.queue, np)
		}
	}
}

// counts says whether a pod is one a policy is meant for: not yet terminated.
func counts(p *v1.Pod) bool {
	return p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

// Run syncs policies with the given number of workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "NetworkPolicy", Queue: c.queue, Synced: c.synced, Sync: c.sync,
		MaxRetries: worker.DefaultMaxRetries, Logger: c.log}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

func (c *Controller) sync(_ context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	np, err := c.policies.NetworkPolicies(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	selects, err := c.selects(np)
	if err != nil {
		return fmt.Errorf("listing pods for NetworkPolicy %s: %w", key, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if selects {
		delete(c.emptySince, key)
		delete(c.reported, key)
		return nil
	}
	if c.reported[key] {
		return nil
	}
	now := c.clock.Now()
	since, ok := c.emptySince[key]
	if !ok {
		c.emptySince[key] = now
		since = now
	}
	if wait := since.Add(c.grace).Sub(now); wait > 0 {
		c.queue.AddAfter(key, wait)
		return nil
	}
	c.reported[key] = true
	c.recorder.Event(np, v1.EventTypeWarning, ReasonNoPodsSelected, Message(np))
	c.log.Info("NetworkPolicy selects no pod", "networkpolicy", key)
	return nil
}

// selects reports whether np's podSelector matches some unterminated pod of its
// namespace, stopping at the first. An invalid selector (which validation refuses)
// selects nothing.
func (c *Controller) selects(np *networkingv1.NetworkPolicy) (bool, error) {
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		return false, nil
	}
	objs, err := c.pods.ByIndex(cache.NamespaceIndex, np.Namespace)
	if err != nil {
		return false, err
	}
	for _, obj := range objs {
		if p, ok := obj.(*v1.Pod); ok && counts(p) && sel.Matches(labels.Set(p.Labels)) {
			return true, nil
		}
	}
	return false, nil
}

func (c *Controller) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.emptySince, key)
	delete(c.reported, key)
}

// Message is the NoPodsSelected event's text for np.
func Message(np *networkingv1.NetworkPolicy) string {
	sel := metav1.FormatLabelSelector(&np.Spec.PodSelector)
	if sel == "<none>" {
		return fmt.Sprintf("podSelector {} selects every pod, and namespace %q has none", np.Namespace)
	}
	return fmt.Sprintf("podSelector %q selects no pod in namespace %q", sel, np.Namespace)
}
