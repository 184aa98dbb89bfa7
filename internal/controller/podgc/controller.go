// Package podgc is Kubernetes' pod garbage collector: it force-deletes
// (grace period 0) the pods nothing else will ever finish. Pods bound to a
// node that no longer exists go once the node has been missing for a short
// quarantine and the API server confirms it is gone, marked first Failed
// with the DisruptionTarget condition (reason DeletionByPodGC); terminating
// pods on a NotReady node with the out-of-service taint go, as do
// terminating pods never scheduled, and the oldest terminated (Succeeded or
// Failed) pods beyond a threshold. Each pass is plan (pure) followed by one
// apply step.
package podgc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tranche/tranche/internal/tombstone"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Defaults for Config's zero values. The period and threshold are
// kube-controller-manager's (gcCheckPeriod, --terminated-pod-gc-threshold).
// The quarantine is shorter than upstream's 40 s: it only covers informer
// lag, and the node's absence is confirmed through the API before anything
// is deleted.
const (
	DefaultPeriod     = 20 * time.Second
	DefaultQuarantine = 5 * time.Second
	DefaultThreshold  = 12500
)

// Config is what New needs.
type Config struct {
	// Client reads nodes, patches pod status and deletes pods.
	Client kubernetes.Interface
	// Informers provides Pods and Nodes; the caller starts it after New.
	Informers informers.SharedInformerFactory
	// Clock drives the passes and the quarantine; nil means the real clock.
	Clock clock.WithTicker
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Period is the time between passes; 0 means DefaultPeriod.
	Period time.Duration
	// Quarantine is how long a node must be missing from the cache before
	// it is re-checked; 0 means DefaultQuarantine.
	Quarantine time.Duration
	// Threshold is how many terminated pods may remain; 0 means
	// DefaultThreshold, negative disables that collection.
	Threshold int
}

// Controller is the pod garbage collector. Create it with New and start it
// with Run.
type Controller struct {
	client     kubernetes.Interface
	clock      clock.WithTicker
	log        *slog.Logger
	period     time.Duration
	quarantine time.Duration
	threshold  int

	podLister  corelisters.PodLister
	nodeLister corelisters.NodeLister
	synced     []cache.InformerSynced

	// wake says a node was deleted: a pass is due one quarantine later,
	// sooner than the next tick.
	wake chan struct{}

	mu sync.Mutex
	// missing is when each node pods are bound to was first seen missing.
	missing map[string]time.Time
}

// New builds the controller. It panics when Client or Informers is
// missing, a wiring mistake.
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("podgc.New: Client and Informers are required")
	}
	c := &Controller{
		client:     cfg.Client,
		clock:      cfg.Clock,
		log:        cfg.Logger,
		period:     cfg.Period,
		quarantine: cfg.Quarantine,
		threshold:  cfg.Threshold,
		wake:       make(chan struct{}, 1),
		missing:    map[string]time.Time{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.period <= 0 {
		c.period = DefaultPeriod
	}
	if c.quarantine <= 0 {
		c.quarantine = DefaultQuarantine
	}
	if c.threshold == 0 {
		c.threshold = DefaultThreshold
	}
	pods := cfg.Informers.Core().V1().Pods()
	nodes := cfg.Informers.Core().V1().Nodes()
	c.podLister, c.nodeLister = pods.Lister(), nodes.Lister()
	c.synced = []cache.InformerSynced{pods.Informer().HasSynced, nodes.Informer().HasSynced}
	// Registration fails only on a stopped informer, which this fresh one is not.
	_, _ = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: c.nodeDeleted})
	return c
}

// nodeDeleted starts the node's quarantine now, so that its pods go one
// quarantine later rather than up to a period after that.
func (c *Controller) nodeDeleted(obj any) {
	node := tombstone.As[*v1.Node](obj)
	if node == nil {
		return
	}
	name := node.Name
	c.mu.Lock()
	if _, ok := c.missing[name]; !ok {
		c.missing[name] = c.clock.Now()
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run waits for the caches and runs a pass every period (and one
// quarantine after a node's deletion) until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.log.Info("started", "period", c.period, "quarantine", c.quarantine, "threshold", c.threshold)
	ticker := c.clock.NewTicker(c.period)
	defer ticker.Stop()
	// soon fires one quarantine after the latest node deletion.
	var soon <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
			soon = c.clock.After(c.quarantine + 100*time.Millisecond)
			continue
		case <-ticker.C():
		case <-soon:
			soon = nil
		}
		if err := c.pass(ctx); err != nil {
			c.log.Error("pod gc pass", "err", err)
		}
	}
}

// pass collects once.
func (c *Controller) pass(ctx context.Context) error {
	pods, err := c.podLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	nodeList, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	nodes := make(map[string]*v1.Node, len(nodeList))
	for _, n := range nodeList {
		nodes[n.Name] = n
	}
	c.mu.Lock()
	s := snapshot{pods: pods, nodes: nodes, missingSince: c.missing, threshold: c.threshold, now: c.clock.Now()}
	d := plan(s, c.quarantine)
	c.missing = d.missing
	c.mu.Unlock()
	if len(d.recheck) > 0 {
		s.gone = map[string]bool{}
		for _, name := range d.recheck {
			_, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				s.gone[name] = true
			case err != nil:
				c.log.Warn("rechecking missing node", "node", name, "err", err)
			}
		}
		s.missingSince = d.missing
		d = plan(s, c.quarantine)
	}
	var errs []error
	for _, v := range d.victims {
		if err := c.collect(ctx, v, s.now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// collect marks v's pod Failed (with the DisruptionTarget condition for an
// orphan) unless it already ended, then force-deletes it.
func (c *Controller) collect(ctx context.Context, v victim, now time.Time) error {
	pod := v.pod
	status := map[string]any{}
	if !isTerminated(pod) {
		status["phase"] = v1.PodFailed
	}
	if v.reason == orphaned {
		status["conditions"] = []v1.PodCondition{{
			Type:               v1.DisruptionTarget,
			Status:             v1.ConditionTrue,
			Reason:             conditionReason,
			Message:            orphanedMessage,
			LastTransitionTime: metav1.NewTime(now),
		}}
	}
	if len(status) > 0 {
		patch, err := json.Marshal(map[string]any{"status": status})
		if err != nil {
			return fmt.Errorf("encoding status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		_, err = c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("marking pod %s/%s failed: %w", pod.Namespace, pod.Name, err)
		}
	}
	zero := int64(0)
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	c.log.Info("collected pod", "pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName, "reason", v.reason.String())
	return nil
}
