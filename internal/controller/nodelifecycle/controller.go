// Package nodelifecycle watches node heartbeats and acts on silent or
// unready nodes the way Kubernetes' node lifecycle and taint eviction
// controllers do. Every monitor period it compares each node's Lease in
// kube-node-lease and its Ready heartbeat with the grace period; a silent
// node gets its Ready and pressure conditions set to Unknown, and every
// node gets the taints its conditions call for (unreachable or not-ready
// as NoSchedule and NoExecute, pressure taints as NoSchedule), removed
// again once it is Ready. Pods on a node gone Unknown are marked not Ready
// so that they leave EndpointSlices, and pods on a node with NoExecute
// taints they do not tolerate are deleted, at once or when their
// tolerationSeconds run out.
//
// The kubelet's side stays with the node agent: only it sets conditions
// back to True, which is what lifts the taints.
package nodelifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/controller/worker"
	"github.com/tranche/tranche/internal/tombstone"
)

// Defaults for Config's zero values: kube-controller-manager's
// --node-monitor-grace-period (50 s since Kubernetes 1.32) and
// --node-monitor-period.
const (
	DefaultGracePeriod   = 50 * time.Second
	DefaultMonitorPeriod = 5 * time.Second
)

// Event reasons and texts, as Kubernetes words them.
const (
	reasonNodeNotReady           = "NodeNotReady"
	reasonTaintManagerEviction   = "TaintManagerEviction"
	reasonDeletionByTaintManager = "DeletionByTaintManager"
	messageDisruptionTarget      = "Taint manager: deleting due to NoExecute taint"
)

// podNodeIndex indexes the shared pod informer by spec.nodeName; the name
// is ours so that other controllers' indexes on the same informer do not
// collide with it.
const podNodeIndex = "nodelifecycle.tranche.dev/nodeName"

// Config is what New needs.
type Config struct {
	// Client writes node status and taints, pod status and deletions.
	Client kubernetes.Interface
	// Informers provides Nodes, Leases and Pods; New must be called before
	// the caller starts it (it adds a pod index).
	Informers informers.SharedInformerFactory
	// Clock is the time source of the monitor loop and of eviction
	// deadlines; nil means the real clock.
	Clock clock.WithTicker
	// Recorder receives the NodeNotReady and TaintManagerEviction events;
	// nil drops them.
	Recorder record.EventRecorder
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// GracePeriod is how long a node may go without renewing its Lease or
	// its Ready heartbeat before it is Unknown; 0 means DefaultGracePeriod.
	GracePeriod time.Duration
	// MonitorPeriod is how often node health is checked; 0 means
	// DefaultMonitorPeriod.
	MonitorPeriod time.Duration
}

// Controller monitors node health and evicts pods from tainted nodes.
// Create it with New and start it with Run.
type Controller struct {
	client   kubernetes.Interface
	clock    clock.WithTicker
	recorder record.EventRecorder
	log      *slog.Logger
	grace    time.Duration
	period   time.Duration

	nodes  corelisters.NodeLister
	leases coordinationlisters.LeaseLister
	pods   cache.Indexer
	synced []cache.InformerSynced

	// evictQueue holds node names whose pods need an eviction decision;
	// it also carries the wake-ups at eviction deadlines.
	evictQueue workqueue.TypedRateLimitingInterface[string]

	// started is when Run began monitoring: like Kubernetes, every node
	// gets a full grace period from then, however stale it looked.
	started time.Time

	// The eviction state below is touched only by the single eviction
	// worker, so it needs no lock.

	// firstSeen stamps NoExecute taints that carry no TimeAdded with the
	// time they were first seen, so their tolerationSeconds run out.
	firstSeen map[taintID]time.Time
	// scheduled holds the node of each pod with a pending deletion, so
	// that dropping the deletion is told in an event.
	scheduled map[types.NamespacedName]string
	// evicted holds the node of each pod deleted but maybe still in the
	// cache without its deletion, so that it is not evicted (and told)
	// twice; an entry goes once the pod leaves the cache.
	evicted map[types.UID]string
}

// taintID names one taint of one node.
type taintID struct {
	node, key string
	effect    v1.TaintEffect
}

// New builds the controller and registers its handlers and pod index on
// cfg.Informers. It panics when Client or Informers is missing or when the
// pod index cannot be added to the pod informer: both are wiring
// mistakes.
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("nodelifecycle.New: Client and Informers are required")
	}
	c := &Controller{
		client:    cfg.Client,
		clock:     cfg.Clock,
		recorder:  cfg.Recorder,
		log:       cfg.Logger,
		grace:     cfg.GracePeriod,
		period:    cfg.MonitorPeriod,
		firstSeen: map[taintID]time.Time{},
		scheduled: map[types.NamespacedName]string{},
		evicted:   map[types.UID]string{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.recorder == nil {
		// A FakeRecorder without a channel drops every event.
		c.recorder = &record.FakeRecorder{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.grace <= 0 {
		c.grace = DefaultGracePeriod
	}
	if c.period <= 0 {
		c.period = DefaultMonitorPeriod
	}
	c.evictQueue = worker.NewQueue("node_lifecycle_eviction", c.clock)

	nodeInf := cfg.Informers.Core().V1().Nodes()
	leaseInf := cfg.Informers.Coordination().V1().Leases()
	podInf := cfg.Informers.Core().V1().Pods()
	c.nodes = nodeInf.Lister()
	c.leases = leaseInf.Lister()
	err := podInf.Informer().AddIndexers(cache.Indexers{podNodeIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*v1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	if err != nil {
		panic(fmt.Sprintf("nodelifecycle.New: adding pod index: %v", err))
	}
	c.pods = podInf.Informer().GetIndexer()
	c.synced = []cache.InformerSynced{
		nodeInf.Informer().HasSynced, leaseInf.Informer().HasSynced, podInf.Informer().HasSynced,
	}
	// Registration fails only on a stopped informer, which these are not.
	_, _ = nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok && len(noExecuteTaints(n)) > 0 {
				c.evictQueue.Add(n.Name)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1.Node)
			n, ok2 := cur.(*v1.Node)
			if ok1 && ok2 && !apiequality.Semantic.DeepEqual(noExecuteTaints(o), noExecuteTaints(n)) {
				c.evictQueue.Add(n.Name)
			}
		},
		DeleteFunc: func(obj any) {
			if n := tombstone.As[*v1.Node](obj); n != nil {
				c.evictQueue.Add(n.Name)
			}
		},
	})
	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.onPod(nil, tombstone.As[*v1.Pod](obj)) },
		UpdateFunc: func(old, cur any) {
			c.onPod(tombstone.As[*v1.Pod](old), tombstone.As[*v1.Pod](cur))
		},
		DeleteFunc: func(obj any) { c.onPod(tombstone.As[*v1.Pod](obj), nil) },
	})
	return c
}

// onPod queues the node of a pod whose eviction decision may have
// changed: one that arrived on, left, or changed its tolerations on a node.
func (c *Controller) onPod(old, cur *v1.Pod) {
	switch {
	case cur == nil && old != nil && old.Spec.NodeName != "":
		c.evictQueue.Add(old.Spec.NodeName)
	case cur == nil || cur.Spec.NodeName == "":
		// Not on a node: nothing to evict it from.
	case old == nil || old.Spec.NodeName != cur.Spec.NodeName ||
		!apiequality.Semantic.DeepEqual(old.Spec.Tolerations, cur.Spec.Tolerations):
		c.evictQueue.Add(cur.Spec.NodeName)
	}
}

// Run waits for the caches, then monitors node health every monitor
// period and processes evictions until ctx ends; it returns once the
// eviction worker returned. A node's evictions are retried for as long as
// they fail: giving up would leave pods on a dead node until its next event.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		c.evictQueue.ShutDown()
		return
	}
	c.started = c.clock.Now()
	c.log.Info("started", "gracePeriod", c.grace, "monitorPeriod", c.period)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		worker.Loop{Kind: "node evictions", Queue: c.evictQueue, Sync: c.syncEvictions,
			MaxRetries: math.MaxInt, Logger: c.log}.Run(ctx, 1)
	})
	ticker := c.clock.NewTicker(c.period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			c.monitor(ctx)
		}
	}
}

// HasSynced reports whether the caches the controller reads are filled.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

// monitor checks the health of every node once.
func (c *Controller) monitor(ctx context.Context) {
	now := c.clock.Now()
	grace := c.grace
	if !now.After(c.started.Add(c.grace)) {
		// Within one grace period of start nothing is stale yet: Run has
		// not watched any node for that long.
		grace = time.Duration(math.MaxInt64)
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		c.log.Error("listing nodes", "err", err)
		return
	}
	slices.SortFunc(nodes, func(a, b *v1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		if err := c.monitorNode(ctx, n, now, grace); err != nil {
			// The next pass computes the same writes again.
			c.log.Warn("updating node health", "node", n.Name, "err", err)
		}
	}
}

// monitorNode applies assess's verdict on one node: the status write, the
// NodeNotReady event when the node leaves Ready, the taint write, and the
// pods' Ready condition while the node is Unknown.
func (c *Controller) monitorNode(ctx context.Context, node *v1.Node, now time.Time, grace time.Duration) error {
	lease, err := c.leases.Leases(v1.NamespaceNodeLease).Get(node.Name)
	if err != nil {
		lease = nil
	}
	conds, taints, changed := assess(node, lease, now, grace)
	cur := node
	if changed {
		upd := node.DeepCopy()
		upd.Status.Conditions = conds
		cur, err = c.client.CoreV1().Nodes().UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("marking node %s status unknown: %w", node.Name, err)
		}
		c.log.Info("node stopped posting status", "node", node.Name, "lastHeard", lastHeard(node, lease))
		if readyStatus(node.Status.Conditions) == v1.ConditionTrue && readyStatus(conds) != v1.ConditionTrue {
			c.recorder.Eventf(nodeRef(node), v1.EventTypeNormal, reasonNodeNotReady,
				"Node %s status is now: %s", node.Name, reasonNodeNotReady)
		}
		// The write returned the newest spec: derive taints from it.
		taints = desiredTaints(cur, conds, now)
	}
	if !sameTaints(cur.Spec.Taints, taints) {
		upd := cur.DeepCopy()
		upd.Spec.Taints = taints
		if _, err := c.client.CoreV1().Nodes().Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating taints of node %s: %w", node.Name, err)
		}
	}
	if readyStatus(conds) == v1.ConditionUnknown {
		return c.markPodsNotReady(ctx, node.Name, now)
	}
	return nil
}

// markPodsNotReady sets the Ready condition of the pods on node to False,
// as Kubernetes' MarkPodsNotReady does: status only, reason and message
// kept, transition time now, and a NodeNotReady event on each pod.
func (c *Controller) markPodsNotReady(ctx context.Context, node string, now time.Time) error {
	var errs []error
	for _, pod := range c.podsOn(node) {
		i := slices.IndexFunc(pod.Status.Conditions, func(pc v1.PodCondition) bool { return pc.Type == v1.PodReady })
		if i < 0 || pod.Status.Conditions[i].Status == v1.ConditionFalse {
			continue
		}
		upd := pod.DeepCopy()
		upd.Status.Conditions[i].Status = v1.ConditionFalse
		upd.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now)
		_, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("marking pod %s/%s not ready: %w", pod.Namespace, pod.Name, err))
			continue
		}
		c.recorder.Event(pod, v1.EventTypeWarning, reasonNodeNotReady, "Node is not ready")
	}
	return errors.Join(errs...)
}

// syncEvictions applies evictions to the pods on node: deletes those due,
// remembers (and wakes up for) those pending, and cancels, with an event,
// the pending ones no longer due.
func (c *Controller) syncEvictions(ctx context.Context, nodeName string) error {
	now := c.clock.Now()
	var taints []v1.Taint
	node, err := c.nodes.Get(nodeName)
	switch {
	case apierrors.IsNotFound(err):
		// A deleted node taints nothing: its pending evictions are cancelled.
	case err != nil:
		return fmt.Errorf("getting node %s: %w", nodeName, err)
	default:
		taints = noExecuteTaints(node)
	}
	taints = c.stampTaints(nodeName, taints, now)
	cached := c.podsOn(nodeName)
	for uid, n := range c.evicted {
		if n == nodeName && !slices.ContainsFunc(cached, func(p *v1.Pod) bool { return p.UID == uid }) {
			delete(c.evicted, uid)
		}
	}
	pods := slices.DeleteFunc(cached, func(p *v1.Pod) bool { _, done := c.evicted[p.UID]; return done })
	deleteNow, deleteAt := evictions(pods, taints, now)

	for _, pod := range pods {
		key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		if _, pending := deleteAt[pod]; pending || slices.Contains(deleteNow, pod) {
			continue
		}
		if n, ok := c.scheduled[key]; ok && n == nodeName {
			delete(c.scheduled, key)
			if pod.DeletionTimestamp == nil {
				c.recorder.Eventf(pod, v1.EventTypeNormal, reasonTaintManagerEviction, "Cancelling deletion of Pod %s", key)
			}
		}
	}
	for key, n := range c.scheduled {
		// Pods gone from the node, or from the cluster, wait for nothing.
		if n == nodeName && !slices.ContainsFunc(pods, func(p *v1.Pod) bool { return p.Namespace == key.Namespace && p.Name == key.Name }) {
			delete(c.scheduled, key)
		}
	}

	var next time.Time
	for pod, at := range deleteAt {
		c.scheduled[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = nodeName
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if !next.IsZero() {
		c.evictQueue.AddAfter(nodeName, next.Sub(now))
	}

	var errs []error
	for _, pod := range deleteNow {
		delete(c.scheduled, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		if err := c.evict(ctx, pod, now); err != nil {
			errs = append(errs, err)
			continue
		}
		c.evicted[pod.UID] = nodeName
	}
	return errors.Join(errs...)
}

// evict deletes pod as Kubernetes' taint eviction controller does: event,
// DisruptionTarget condition, then delete.
func (c *Controller) evict(ctx context.Context, pod *v1.Pod, now time.Time) error {
	c.recorder.Eventf(pod, v1.EventTypeNormal, reasonTaintManagerEviction, "Marking for deletion Pod %s/%s", pod.Namespace, pod.Name)
	if !hasDisruptionTarget(pod) {
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.PodCondition{{
			Type:               v1.DisruptionTarget,
			Status:             v1.ConditionTrue,
			Reason:             reasonDeletionByTaintManager,
			Message:            messageDisruptionTarget,
			LastTransitionTime: metav1.NewTime(now),
		}}}})
		if err != nil {
			return fmt.Errorf("encoding condition of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		_, err = c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("marking pod %s/%s as disruption target: %w", pod.Namespace, pod.Name, err)
		}
	}
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	c.log.Info("evicted pod from tainted node", "pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName)
	return nil
}

// stampTaints gives each taint without TimeAdded the time it was first
// seen on node, and forgets the taints node no longer has.
func (c *Controller) stampTaints(node string, taints []v1.Taint, now time.Time) []v1.Taint {
	seen := map[taintID]bool{}
	out := make([]v1.Taint, len(taints))
	for i, t := range taints {
		out[i] = *t.DeepCopy()
		if t.TimeAdded != nil {
			continue
		}
		id := taintID{node: node, key: t.Key, effect: t.Effect}
		seen[id] = true
		first, ok := c.firstSeen[id]
		if !ok {
			first = now
			c.firstSeen[id] = now
		}
		stamp := metav1.NewTime(first)
		out[i].TimeAdded = &stamp
	}
	for id := range c.firstSeen {
		if id.node == node && !seen[id] {
			delete(c.firstSeen, id)
		}
	}
	return out
}

// podsOn returns the cached pods bound to node.
func (c *Controller) podsOn(node string) []*v1.Pod {
	objs, err := c.pods.ByIndex(podNodeIndex, node)
	if err != nil {
		c.log.Error("reading pod index", "node", node, "err", err)
		return nil
	}
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *v1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return pods
}

// noExecuteTaints returns node's NoExecute taints.
func noExecuteTaints(node *v1.Node) []v1.Taint {
	var out []v1.Taint
	for _, t := range node.Spec.Taints {
		if t.Effect == v1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// sameTaints reports whether a and b hold the same taints in the same
// order; nil and empty are the same.
func sameTaints(a, b []v1.Taint) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// hasDisruptionTarget reports whether pod is already marked for disruption.
func hasDisruptionTarget(pod *v1.Pod) bool {
	for _, pc := range pod.Status.Conditions {
		if pc.Type == v1.DisruptionTarget && pc.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// nodeRef is the reference Kubernetes' node controllers attach their node
// events to.
func nodeRef(node *v1.Node) *v1.ObjectReference {
	return &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
}
