// Package daemonset runs one pod of each DaemonSet on every node that should
// run it: the pod is pinned to its node through a required matchFields
// metadata.name affinity and bound by the default scheduler, as upstream.
// Updates roll through ControllerRevisions and the controller-revision-hash
// label under the RollingUpdate (maxUnavailable, maxSurge) or OnDelete
// strategy.
package daemonset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/tranche/tranche/internal/controller/controllerref"
	"github.com/tranche/tranche/internal/controller/worker"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// maxRetries bounds the retries of a failing DaemonSet before it waits for
// its next event.
const maxRetries = 15

// Backoff of re-creating a daemon pod on a node whose pod failed.
const (
	failedPodBackoffInitial = time.Second
	failedPodBackoffMax     = 15 * time.Minute
)

var controllerKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// Config is what New needs.
type Config struct {
	// Client writes pods, ControllerRevisions, DaemonSet status and events.
	Client kubernetes.Interface
	// Informers provides DaemonSets, Pods, Nodes and ControllerRevisions; the
	// caller starts it after New.
	Informers informers.SharedInformerFactory
	// Recorder receives the controller's events; nil drops them.
	Recorder record.EventRecorder
	// Clock is used for availability, backoffs and requeues; nil means the
	// real clock.
	Clock clock.WithTicker
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// Controller reconciles DaemonSets.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.WithTicker
	logger   *slog.Logger

	sets      appslisters.DaemonSetLister
	pods      corelisters.PodLister
	nodes     corelisters.NodeLister
	revisions appslisters.ControllerRevisionLister
	synced    []cache.InformerSynced

	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *worker.Expectations

	backoffMu sync.Mutex
	backoff   map[string]nodeBackoff // key: "<ds key>/<node>"
}

type nodeBackoff struct {
	delay time.Duration
	until time.Time
}

// New builds the controller and registers its event handlers. It panics
// when Client or Informers is missing (a wiring mistake).
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("daemonset.New: Client and Informers are required")
	}
	cfg.Logger, cfg.Clock, cfg.Recorder = worker.Defaults(cfg.Logger, cfg.Clock, cfg.Recorder)
	dsInf := cfg.Informers.Apps().V1().DaemonSets()
	podInf := cfg.Informers.Core().V1().Pods()
	nodeInf := cfg.Informers.Core().V1().Nodes()
	revInf := cfg.Informers.Apps().V1().ControllerRevisions()
	c := &Controller{
		client:    cfg.Client,
		recorder:  cfg.Recorder,
		clock:     cfg.Clock,
		logger:    cfg.Logger,
		sets:      dsInf.Lister(),
		pods:      podInf.Lister(),
		nodes:     nodeInf.Lister(),
		revisions: revInf.Lister(),
		synced: []cache.InformerSynced{dsInf.Informer().HasSynced, podInf.Informer().HasSynced,
			nodeInf.Informer().HasSynced, revInf.Informer().HasSynced},
		queue:        worker.NewQueue("daemonset", cfg.Clock),
		expectations: worker.NewExpectations(cfg.Clock.Now),
		backoff:      map[string]nodeBackoff{},
	}
	worker.Watch(dsInf.Informer(), c.enqueue)
	worker.WatchChanges(podInf.Informer(), c.onPod)
	must(nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.enqueueAll() },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*v1.Node), cur.(*v1.Node)
			if !reflect.DeepEqual(o.Labels, n.Labels) || !reflect.DeepEqual(o.Spec.Taints, n.Spec.Taints) {
				c.enqueueAll()
			}
		},
		DeleteFunc: func(any) { c.enqueueAll() },
	}))
	return c
}

func must(_ cache.ResourceEventHandlerRegistration, err error) {
	if err != nil {
		panic(fmt.Sprintf("daemonset: adding event handler: %v", err))
	}
}

// Run waits for the caches and syncs with the given number of workers until
// ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "DaemonSet", Queue: c.queue, Synced: c.synced, Sync: c.sync, MaxRetries: maxRetries, Logger: c.logger}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled: the
// controller manager starts Run once they are.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

func (c *Controller) enqueue(obj any) { worker.Enqueue(c.queue, obj) }

func (c *Controller) enqueueAll() {
	all, err := c.sets.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range all {
		c.enqueue(ds)
	}
}

// onPod observes creates and deletes for expectations and wakes the owning
// DaemonSet, or every matching one for an orphan that may be adopted.
func (c *Controller) onPod(old, cur any) {
	oldPod, curPod, pod := worker.Pods(old, cur)
	if pod == nil {
		return
	}
	if key, hasController := worker.OwnerKey(pod, controllerKind); hasController {
		if key != "" {
			c.expectations.ObservePod(key, oldPod, curPod)
			c.queue.Add(key)
		}
		return
	}
	sets, err := c.sets.DaemonSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range sets {
		if worker.Selects(ds.Spec.Selector, pod.Labels) {
			c.enqueue(ds)
		}
	}
}

// sync reconciles one DaemonSet (namespace/name).
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("DaemonSet key %q: %w", key, err)
	}
	cached, err := c.sets.DaemonSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting DaemonSet %s: %w", key, err)
	}
	ds := cached.DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil
	}
	if sel.Empty() {
		c.recorder.Event(ds, v1.EventTypeWarning, "SelectingAll", "This daemon set is selecting all pods. A non-empty selector is required.")
		return nil
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing nodes for DaemonSet %s: %w", key, err)
	}
	pods, err := c.claimPods(ctx, ds, sel)
	if err != nil {
		return err
	}
	hash := templateHash(ds)
	if ds.DeletionTimestamp == nil {
		if err := c.syncRevisions(ctx, ds, hash, pods); err != nil {
			return err
		}
	}
	now := c.clock.Now()
	p := compute(snapshot{
		ds:      ds,
		hash:    hash,
		nodes:   nodes,
		pods:    pods,
		now:     now,
		backoff: c.backoffs(key),
		manage:  ds.DeletionTimestamp == nil && c.expectations.Satisfied(key),
	})
	applyErr := c.apply(ctx, key, ds, hash, p)
	if err := c.updateStatus(ctx, ds, p.status); err != nil {
		return errors.Join(applyErr, err)
	}
	c.requeueLater(key, ds, pods, now)
	return applyErr
}

// requeueLater wakes the DaemonSet when a ready pod becomes available or a
// node's failed-pod backoff ends, since no event marks either moment.
func (c *Controller) requeueLater(key string, ds *appsv1.DaemonSet, pods []*v1.Pod, now time.Time) {
	var next time.Duration
	consider := func(d time.Duration) {
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	if ds.Spec.MinReadySeconds > 0 {
		for _, pod := range pods {
			if podReady(pod) && !available(pod, ds.Spec.MinReadySeconds, now) {
				consider(time.Duration(ds.Spec.MinReadySeconds) * time.Second)
			}
		}
	}
	for _, until := range c.backoffs(key) {
		consider(until.Sub(now))
	}
	if next > 0 {
		c.queue.AddAfter(key, next)
	}
}

func (c *Controller) backoffs(key string) map[string]time.Time {
	c.backoffMu.Lock()
	defer c.backoffMu.Unlock()
	out := map[string]time.Time{}
	prefix := key + "/"
	for k, b := range c.backoff {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			out[k[len(prefix):]] = b.until
		}
	}
	return out
}

// noteFailedPod doubles the node's re-creation backoff.
func (c *Controller) noteFailedPod(key, node string) {
	c.backoffMu.Lock()
	defer c.backoffMu.Unlock()
	k := key + "/" + node
	b := c.backoff[k]
	b.delay = min(max(b.delay*2, failedPodBackoffInitial), failedPodBackoffMax)
	b.until = c.clock.Now().Add(b.delay)
	c.backoff[k] = b
}

// claimPods lists the DaemonSet's pods, adopting matching orphans and
// releasing owned pods that no longer match, by ControllerRef rules.
func (c *Controller) claimPods(ctx context.Context, ds *appsv1.DaemonSet, sel labels.Selector) ([]*v1.Pod, error) {
	all, err := c.pods.Pods(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing pods of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	// Adopt only for the DaemonSet that exists now, not for a deleted one
	// of the same name still in the cache.
	recheck := controllerref.Recheck(ds, controllerKind.Kind, func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	})
	return controllerref.NewPodManager(c.client.CoreV1(), ds, controllerKind, sel, recheck).ClaimPods(ctx, all)
}

// syncRevisions makes sure the current template has the newest
// ControllerRevision and trims history beyond revisionHistoryLimit.
func (c *Controller) syncRevisions(ctx context.Context, ds *appsv1.DaemonSet, hash string, pods []*v1.Pod) error {
	data, err := revisionData(ds)
	if err != nil {
		return err
	}
	all, err := c.revisions.ControllerRevisions(ds.Namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing revisions of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	var owned []*appsv1.ControllerRevision
	for _, r := range all {
		if ref := metav1.GetControllerOf(r); ref != nil && ref.UID == ds.UID {
			owned = append(owned, r)
		}
	}
	live := map[string]bool{}
	for _, pod := range pods {
		live[pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] = true
	}
	p := planRevisions(ds, hash, data, owned, live)
	api := c.client.AppsV1().ControllerRevisions(ds.Namespace)
	if p.create != nil {
		if _, err := api.Create(ctx, p.create, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ControllerRevision %s/%s: %w", ds.Namespace, p.create.Name, err)
		}
	}
	if p.bump != nil {
		if _, err := api.Update(ctx, p.bump, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating ControllerRevision %s/%s: %w", ds.Namespace, p.bump.Name, err)
		}
	}
	for _, name := range p.deletes {
		if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ControllerRevision %s/%s: %w", ds.Namespace, name, err)
		}
	}
	return nil
}

// apply performs the plan's pod writes: creates in slow-start batches
// (1, 2, 4, ...) so a failing create is not repeated for every node, then
// deletes.
func (c *Controller) apply(ctx context.Context, key string, ds *appsv1.DaemonSet, hash string, p plan) error {
	if len(p.creates) == 0 && len(p.deletes) == 0 {
		return nil
	}
	c.expectations.Expect(key, len(p.creates), len(p.deletes))
	var errs []error
	for _, pod := range p.failed {
		node := targetNode(pod)
		c.recorder.Eventf(ds, v1.EventTypeWarning, "FailedDaemonPod", "Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, node)
		c.noteFailedPod(key, node)
	}
	pending := p.creates
	for batch := 1; len(pending) > 0; batch *= 2 {
		n := min(batch, len(pending))
		var wg sync.WaitGroup
		var mu sync.Mutex
		failed := 0
		for _, node := range pending[:n] {
			wg.Go(func() {
				if err := c.createPod(ctx, ds, hash, node); err != nil {
					mu.Lock()
					errs = append(errs, err)
					failed++
					mu.Unlock()
					c.expectations.Observe(key, 1, 0)
				}
			})
		}
		wg.Wait()
		pending = pending[n:]
		if failed > 0 {
			c.expectations.Observe(key, len(pending), 0)
			break
		}
	}
	for _, pod := range p.deletes {
		err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		switch {
		case err == nil:
			c.recorder.Eventf(ds, v1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", pod.Name)
		case apierrors.IsNotFound(err):
			c.expectations.Observe(key, 0, 1)
		default:
			c.expectations.Observe(key, 0, 1)
			c.recorder.Eventf(ds, v1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
			errs = append(errs, fmt.Errorf("deleting pod %s/%s of DaemonSet %s: %w", pod.Namespace, pod.Name, key, err))
		}
	}
	return errors.Join(errs...)
}

// templateGenerationLabel carries the DaemonSet generation a pod was made
// from, as upstream labels daemon pods.
const templateGenerationLabel = "pod-template-generation"

// newPod builds the daemon pod for node from the template: the revision
// hash and template generation labels, the automatic tolerations and the node-pinning affinity.
func newPod(ds *appsv1.DaemonSet, hash, node string) *v1.Pod {
	tmpl := ds.Spec.Template.DeepCopy()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ds.Name + "-",
			Namespace:       ds.Namespace,
			Labels:          copyMap(tmpl.Labels),
			Annotations:     tmpl.Annotations,
			Finalizers:      tmpl.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Spec: tmpl.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	pod.Labels[templateGenerationLabel] = strconv.FormatInt(ds.Generation, 10)
	addTolerations(&pod.Spec, daemonTolerations(&pod.Spec))
	pinToNode(&pod.Spec, node)
	return pod
}

func (c *Controller) createPod(ctx context.Context, ds *appsv1.DaemonSet, hash, node string) error {
	created, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, newPod(ds, hash, node), metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			// Nothing will be created there any more: not an error.
			c.expectations.Observe(ds.Namespace+"/"+ds.Name, 1, 0)
			return nil
		}
		c.recorder.Eventf(ds, v1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return fmt.Errorf("creating pod of DaemonSet %s/%s on node %s: %w", ds.Namespace, ds.Name, node, err)
	}
	c.recorder.Eventf(ds, v1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", created.Name)
	return nil
}

// updateStatus writes the status when it changed.
func (c *Controller) updateStatus(ctx context.Context, ds *appsv1.DaemonSet, st appsv1.DaemonSetStatus) error {
	if reflect.DeepEqual(ds.Status, st) {
		return nil
	}
	ds.Status = st
	_, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, ds, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating status of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	return nil
}
