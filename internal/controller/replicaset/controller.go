// Package replicaset implements the ReplicaSet controller: it keeps
// spec.replicas pods of each ReplicaSet running, adopting and releasing
// pods by the ControllerRef rules, and reports their counts in the
// ReplicaSet's status the way kubectl and the Deployment controller read
// them. Each sync is planReplicaSet (pure) followed by one apply step.
package replicaset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/controller/controllerref"
	"github.com/tranche/tranche/internal/controller/worker"
	"github.com/tranche/tranche/internal/tombstone"
)

// Event reasons, as upstream's controllers record them.
const (
	eventSuccessfulCreate = "SuccessfulCreate"
	eventSuccessfulDelete = "SuccessfulDelete"
	eventFailedCreate     = reasonFailedCreate
	eventFailedDelete     = reasonFailedDelete
	eventSelectorInvalid  = "SelectorInvalid"
)

// Config is what New needs.
type Config struct {
	// Client creates and deletes pods and writes ReplicaSet status.
	Client kubernetes.Interface
	// Informers provides ReplicaSets and Pods; the caller starts it after New.
	Informers informers.SharedInformerFactory
	// Recorder receives the pod create/delete events; nil drops them.
	Recorder record.EventRecorder
	// Clock is the time for availability, conditions and expectation
	// expiry; nil means the real clock.
	Clock clock.Clock
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
}

// Controller reconciles ReplicaSets with their pods. Create it with New
// and start it with Run.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.Clock
	log      *slog.Logger

	owners    owners
	podLister corelisters.PodLister
	synced    []cache.InformerSynced

	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *expectations
}

// New builds the controller and registers its event handlers on
// cfg.Informers. It panics when Client or Informers is missing, a wiring
// mistake.
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("replicaset.New: Client and Informers are required")
	}
	return newController(cfg, newReplicaSets(cfg.Client, cfg.Informers), "replicaset")
}

// newController builds a controller keeping the pods of the objects o
// serves; name names its queue (the manager names its logs).
func newController(cfg Config, o owners, name string) *Controller {
	c := &Controller{
		owners:   o,
		client:   cfg.Client,
		recorder: cfg.Recorder,
		clock:    cfg.Clock,
		log:      cfg.Logger,
	}
	if c.recorder == nil {
		c.recorder = &record.FakeRecorder{}
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.expectations = newExpectations(c.clock)
	// The default controller limiter backs a failing ReplicaSet off
	// exponentially (5ms doubling up to 1000s), so a ReplicaSet that cannot
	// be reconciled never hot-loops.
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})

	podInformer := cfg.Informers.Core().V1().Pods()
	c.podLister = podInformer.Lister()
	c.synced = []cache.InformerSynced{o.informer().HasSynced, podInformer.Informer().HasSynced}
	// Registration fails only on a stopped informer, which these fresh ones are not.
	_, _ = o.informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueRS,
		UpdateFunc: func(_, cur any) { c.enqueueRS(cur) },
		DeleteFunc: c.deleteRS,
	})
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	})
	return c
}

// Run waits for the informer caches, runs workers sync workers and blocks
// until ctx ends. A ReplicaSet that fails to sync is retried with the
// queue's backoff for as long as it fails.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: c.owners.kind().Kind, Queue: c.queue, Synced: c.synced, Sync: c.sync, MaxRetries: math.MaxInt, Logger: c.log}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled: the
// controller manager starts Run once they are.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

func (c *Controller) enqueueRS(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.queue.Add(key)
}

func (c *Controller) deleteRS(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.expectations.forget(key)
	c.queue.Add(key)
}

// resolveRef returns the key of the ReplicaSet ref names, if it is in the
// cache with the same UID.
func (c *Controller) resolveRef(namespace string, ref *metav1.OwnerReference) (string, *appsv1.ReplicaSet) {
	kind := c.owners.kind()
	if ref.Kind != kind.Kind || ref.APIVersion != kind.GroupVersion().String() {
		return "", nil
	}
	rs, err := c.owners.get(namespace, ref.Name)
	if err != nil || rs.UID != ref.UID {
		return "", nil
	}
	return namespace + "/" + rs.Name, rs
}

// enqueueMatching wakes every ReplicaSet whose selector matches an orphan
// pod, so that one of them can adopt it.
func (c *Controller) enqueueMatching(pod *v1.Pod) {
	list, err := c.owners.list(pod.Namespace)
	if err != nil {
		return
	}
	for _, rs := range list {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		c.queue.Add(pod.Namespace + "/" + rs.Name)
	}
}

func (c *Controller) addPod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already terminating (after a restart of
		// the informer): it counts as deleted for expectations.
		c.deletePod(pod)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		if key, _ := c.resolveRef(pod.Namespace, ref); key != "" {
			c.expectations.creationObserved(key)
			c.queue.Add(key)
		}
		return
	}
	c.enqueueMatching(pod)
}

func (c *Controller) updatePod(oldObj, curObj any) {
	old, ok1 := oldObj.(*v1.Pod)
	cur, ok2 := curObj.(*v1.Pod)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return
	}
	labelsChanged := !labels.Equals(old.Labels, cur.Labels)
	if cur.DeletionTimestamp != nil {
		// A graceful deletion shows first as an update; count it now so
		// the replacement is not delayed by the grace period.
		c.deletePod(cur)
		if labelsChanged {
			c.deletePod(old)
		}
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !refsEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if key, _ := c.resolveRef(old.Namespace, oldRef); key != "" {
			c.queue.Add(key)
		}
	}
	if curRef != nil {
		key, rs := c.resolveRef(cur.Namespace, curRef)
		if key == "" {
			return
		}
		c.queue.Add(key)
		// Availability needs a second look once minReadySeconds passed;
		// no pod event announces it.
		if !isPodReady(old) && isPodReady(cur) && rs.Spec.MinReadySeconds > 0 {
			c.queue.AddAfter(key, time.Duration(rs.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if labelsChanged || refChanged {
		c.enqueueMatching(cur)
	}
}

func (c *Controller) deletePod(obj any) {
	pod := tombstone.As[*v1.Pod](obj)
	if pod == nil {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return
	}
	key, _ := c.resolveRef(pod.Namespace, ref)
	if key == "" {
		return
	}
	c.expectations.deletionObserved(key, podKey(pod))
	c.queue.Add(key)
}

// noun is the controller's kind as its errors name it: "replicaset" or
// "replicationcontroller".
func (c *Controller) noun() string { return strings.ToLower(c.owners.kind().Kind) }

func refsEqual(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID
}

// sync reconciles the ReplicaSet key ("namespace/name") once.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	rs, err := c.owners.get(namespace, name)
	if apierrors.IsNotFound(err) {
		c.expectations.forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting %s %s: %w", c.noun(), key, err)
	}
	manage := c.expectations.satisfied(key)
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		// The API server rejects such selectors; an old object may still
		// carry one. Retrying would not help: say so once and stop.
		c.recorder.Eventf(rs, v1.EventTypeWarning, eventSelectorInvalid, "invalid selector: %v", err)
		return nil
	}
	all, err := c.podLister.Pods(namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing pods of %s %s: %w", c.noun(), key, err)
	}
	var active, terminating []*v1.Pod
	for _, pod := range all {
		switch {
		case isPodActive(pod):
			active = append(active, pod)
		case isPodTerminating(pod):
			terminating = append(terminating, pod)
		}
	}
	cl := claimPods(rs, selector, active)
	owned, claimErr := c.applyClaims(ctx, rs, cl)
	if claimErr != nil {
		return claimErr
	}
	var related []*v1.Pod
	if manage && rs.DeletionTimestamp == nil && len(owned) > int(replicas(rs)) {
		related = c.relatedPods(rs, all)
	}
	p := planReplicaSet(snapshot{
		rs:          rs,
		active:      owned,
		terminating: claimPods(rs, selector, terminating).Owned,
		related:     related,
		manage:      manage && rs.DeletionTimestamp == nil,
		now:         c.clock.Now(),
	})
	manageErr := c.applyPlan(ctx, key, rs, p)
	status := p.status
	if manageErr != nil {
		reason := reasonFailedCreate
		if len(p.delete) > 0 {
			reason = reasonFailedDelete
		}
		status = failedStatus(status, &rs.Status, reason, manageErr, c.clock.Now())
	}
	if manageErr != nil {
		manageErr = fmt.Errorf("managing pods of %s %s: %w", c.noun(), key, manageErr)
	}
	updated, err := c.writeStatus(ctx, rs, status)
	if err != nil {
		return errors.Join(manageErr, err)
	}
	if manageErr == nil && updated.Spec.MinReadySeconds > 0 &&
		updated.Status.ReadyReplicas == replicas(updated) && updated.Status.AvailableReplicas != replicas(updated) {
		c.queue.AddAfter(key, time.Duration(updated.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

// relatedPods are the pods of every ReplicaSet sharing rs's controller
// (just rs's when it has none), for the co-location rank on scale-down.
func (c *Controller) relatedPods(rs *appsv1.ReplicaSet, all []*v1.Pod) []*v1.Pod {
	owners := map[types.UID]bool{rs.UID: true}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		siblings, err := c.owners.list(rs.Namespace)
		if err == nil {
			for _, s := range siblings {
				if sref := metav1.GetControllerOfNoCopy(s); sref != nil && sref.UID == ref.UID {
					owners[s.UID] = true
				}
			}
		}
	}
	var related []*v1.Pod
	for _, pod := range all {
		if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && owners[ref.UID] {
			related = append(related, pod)
		}
	}
	return related
}

// applyClaims adopts and releases pods as cl says and returns the pods rs
// owns afterwards. Before the first adoption it re-reads rs from the API
// server: a ReplicaSet deleted since the cache saw it must not adopt.
func (c *Controller) applyClaims(ctx context.Context, rs *appsv1.ReplicaSet, cl controllerref.Claims) ([]*v1.Pod, error) {
	recheck := controllerref.Recheck(rs, c.owners.kind().Kind, func(ctx context.Context) (metav1.Object, error) {
		return c.owners.fetch(ctx, rs.Namespace, rs.Name)
	})
	return controllerref.NewPodManager(c.client.CoreV1(), rs, ownerKind(rs), nil, recheck).Apply(ctx, cl)
}

// applyPlan creates and deletes pods as p says and returns the first
// failure unwrapped, since its text goes into the ReplicaFailure condition
// as upstream writes it. Expectations are recorded first, so the next
// decision awaits the informer's reports of these very pods. Creates go in
// slow-start batches (1, 2, 4, ...) that stop at the first failure, so a
// quota or admission error costs one request, not hundreds.
func (c *Controller) applyPlan(ctx context.Context, key string, rs *appsv1.ReplicaSet, p plan) error {
	if p.create > 0 {
		c.expectations.expectCreations(key, p.create)
		done, err := slowStart(p.create, func() error { return c.createPod(ctx, rs) })
		for range p.create - done {
			c.expectations.creationObserved(key)
		}
		return err
	}
	if len(p.delete) == 0 {
		return nil
	}
	keys := make([]string, len(p.delete))
	for i, pod := range p.delete {
		keys[i] = podKey(pod)
	}
	c.expectations.expectDeletions(key, keys)
	errs := make([]error, len(p.delete))
	var wg sync.WaitGroup
	for i, pod := range p.delete {
		wg.Go(func() {
			err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
			if err != nil {
				c.expectations.deletionObserved(key, podKey(pod))
				if apierrors.IsNotFound(err) {
					return
				}
				c.recorder.Eventf(rs, v1.EventTypeWarning, eventFailedDelete, "Error deleting: %v", err)
				errs[i] = err
				return
			}
			c.recorder.Eventf(rs, v1.EventTypeNormal, eventSuccessfulDelete, "Deleted pod: %v", pod.Name)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// createPod creates one pod of rs and records the event. Creation refused
// because the namespace is terminating is not an error: nothing can be
// created there any more.
func (c *Controller) createPod(ctx context.Context, rs *appsv1.ReplicaSet) error {
	pod, err := podFromTemplate(rs)
	if err != nil {
		c.recorder.Eventf(rs, v1.EventTypeWarning, eventFailedCreate, "Error creating: %v", err)
		return err
	}
	created, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			return nil
		}
		c.recorder.Eventf(rs, v1.EventTypeWarning, eventFailedCreate, "Error creating: %v", err)
		return err
	}
	c.recorder.Eventf(rs, v1.EventTypeNormal, eventSuccessfulCreate, "Created pod: %v", created.Name)
	return nil
}

// slowStart calls fn count times in batches of 1, 2, 4, ... run in
// parallel, stopping after the first batch with a failure. It returns the
// number of successful calls and the first error.
func slowStart(count int, fn func() error) (int, error) {
	done := 0
	remaining := count
	for batch := min(remaining, 1); batch > 0; batch = min(2*batch, remaining) {
		errs := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			wg.Go(func() {
				if err := fn(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		done += batch - len(errs)
		if len(errs) > 0 {
			return done, <-errs
		}
		remaining -= batch
	}
	return done, nil
}

// writeStatus writes status when it differs from rs's, re-reading rs once
// on a conflict. It returns the ReplicaSet as last known.
func (c *Controller) writeStatus(ctx context.Context, rs *appsv1.ReplicaSet, status appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	if apiequality.Semantic.DeepEqual(rs.Status, status) {
		return rs, nil
	}
	next := rs.DeepCopy()
	next.Status = status
	updated, err := c.owners.updateStatus(ctx, next)
	if apierrors.IsConflict(err) {
		fresh, gerr := c.owners.fetch(ctx, rs.Namespace, rs.Name)
		if gerr != nil {
			return nil, fmt.Errorf("updating status of %s %s/%s: %w", c.noun(), rs.Namespace, rs.Name, gerr)
		}
		fresh.Status = status
		updated, err = c.owners.updateStatus(ctx, fresh)
	}
	if err != nil {
		return nil, fmt.Errorf("updating status of %s %s/%s: %w", c.noun(), rs.Namespace, rs.Name, err)
	}
	return updated, nil
}
