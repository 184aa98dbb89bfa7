// Package job runs Jobs to completion: it keeps the wanted number of pods
// active, counts every finished pod exactly once through the
// batch.kubernetes.io/job-tracking finalizer and
// status.uncountedTerminatedPods, backs off re-creations after failures,
// honours backoffLimit, activeDeadlineSeconds, podFailurePolicy, suspend,
// Indexed completion and ttlSecondsAfterFinished, and sets the conditions
// kubectl reads as upstream's Job controller does.
package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"

	"github.com/tranche/tranche/internal/controller/controllerref"
	"github.com/tranche/tranche/internal/controller/worker"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// maxRetries bounds the retries of a failing Job before it waits for its
// next event.
const maxRetries = 15

// jobControllerName is the spec.managedBy value (or its absence) this
// controller serves; jobs managed by another controller are left alone.
const jobControllerName = "kubernetes.io/job-controller"

// Config is what New needs.
type Config struct {
	// Client writes pods, Job status, Job deletions and events.
	Client kubernetes.Interface
	// Informers provides Jobs and Pods; the caller starts it after New.
	Informers informers.SharedInformerFactory
	// Recorder receives the controller's events; nil drops them.
	Recorder record.EventRecorder
	// Clock is used for backoffs, deadlines, TTLs and requeues; nil means
	// the real clock.
	Clock clock.WithTicker
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// Controller reconciles Jobs.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.WithTicker
	logger   *slog.Logger

	jobs   batchlisters.JobLister
	pods   corelisters.PodLister
	synced []cache.InformerSynced

	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *worker.Expectations

	finalizersMu sync.Mutex
	// finalizers holds, per job key, pods whose finalizer removal is not
	// yet observed.
	finalizers map[string]map[types.UID]bool
}

// New builds the controller and registers its event handlers. It panics
// when Client or Informers is missing (a wiring mistake).
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("job.New: Client and Informers are required")
	}
	cfg.Logger, cfg.Clock, cfg.Recorder = worker.Defaults(cfg.Logger, cfg.Clock, cfg.Recorder)
	jobInf := cfg.Informers.Batch().V1().Jobs()
	podInf := cfg.Informers.Core().V1().Pods()
	c := &Controller{
		client:       cfg.Client,
		recorder:     cfg.Recorder,
		clock:        cfg.Clock,
		logger:       cfg.Logger,
		jobs:         jobInf.Lister(),
		pods:         podInf.Lister(),
		synced:       []cache.InformerSynced{jobInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue:        worker.NewQueue("job", cfg.Clock),
		expectations: worker.NewExpectations(cfg.Clock.Now),
		finalizers:   map[string]map[types.UID]bool{},
	}
	worker.Watch(jobInf.Informer(), c.enqueue)
	worker.WatchChanges(podInf.Informer(), c.onPod)
	return c
}

// Run waits for the caches and syncs with the given number of workers until
// ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "Job", Queue: c.queue, Synced: c.synced, Sync: c.sync, MaxRetries: maxRetries, Logger: c.logger}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled: the
// controller manager starts Run once they are.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

func (c *Controller) enqueue(obj any) { worker.Enqueue(c.queue, obj) }

// onPod observes creates, deletes and finalizer removals, and wakes the
// owning Job, or every matching one for an orphan that may be adopted.
func (c *Controller) onPod(old, cur any) {
	oldPod, curPod, pod := worker.Pods(old, cur)
	if pod == nil {
		return
	}
	if key, hasController := worker.OwnerKey(pod, controllerKind); hasController {
		if key == "" {
			return
		}
		if curPod != nil && hasFinalizer(curPod) && c.orphanFinalizerHeld(curPod.Namespace, metav1.GetControllerOf(curPod)) {
			c.queue.Add(orphanPrefix + curPod.Namespace + "/" + curPod.Name)
			return
		}
		c.expectations.ObservePod(key, oldPod, curPod)
		if curPod == nil || !hasFinalizer(curPod) {
			c.finalizerObserved(key, pod.UID)
		}
		c.queue.Add(key)
		return
	}
	if curPod == nil {
		return
	}
	if hasFinalizer(curPod) {
		c.queue.Add(orphanPrefix + curPod.Namespace + "/" + curPod.Name)
	}
	jobs, err := c.jobs.Jobs(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, job := range jobs {
		if worker.Selects(job.Spec.Selector, pod.Labels) {
			c.enqueue(job)
		}
	}
}

func (c *Controller) finalizerObserved(key string, uid types.UID) {
	c.finalizersMu.Lock()
	defer c.finalizersMu.Unlock()
	delete(c.finalizers[key], uid)
}

func (c *Controller) pendingFinalizers(key string) map[types.UID]bool {
	c.finalizersMu.Lock()
	defer c.finalizersMu.Unlock()
	out := map[types.UID]bool{}
	for uid := range c.finalizers[key] {
		out[uid] = true
	}
	return out
}

func (c *Controller) expectFinalizerRemoved(key string, uid types.UID) {
	c.finalizersMu.Lock()
	defer c.finalizersMu.Unlock()
	if c.finalizers[key] == nil {
		c.finalizers[key] = map[types.UID]bool{}
	}
	c.finalizers[key][uid] = true
}

// sync reconciles one Job (namespace/name).
func (c *Controller) sync(ctx context.Context, key string) error {
	if podKey, ok := isOrphanKey(key); ok {
		return c.syncOrphanPod(ctx, podKey)
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("Job key %q: %w", key, err)
	}
	cached, err := c.jobs.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Forget(key)
		c.finalizersMu.Lock()
		delete(c.finalizers, key)
		c.finalizersMu.Unlock()
		return c.releaseDeletedJobPods(ctx, ns, name)
	}
	if err != nil {
		return fmt.Errorf("getting Job %s: %w", key, err)
	}
	if m := cached.Spec.ManagedBy; m != nil && *m != jobControllerName {
		return nil
	}
	job := cached.DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil
	}
	pods, err := c.claimPods(ctx, job, sel)
	if err != nil {
		return err
	}
	p := compute(snapshot{
		job:               job,
		pods:              pods,
		pendingFinalizers: c.pendingFinalizers(key),
		now:               c.clock.Now(),
		manage:            job.DeletionTimestamp == nil && c.expectations.Satisfied(key),
	})
	return c.apply(ctx, key, job, p)
}

// claimPods lists the Job's pods, adopting matching orphans and releasing
// owned pods that no longer match, by ControllerRef rules. As upstream,
// adoption adds the tracking finalizer and release removes it.
func (c *Controller) claimPods(ctx context.Context, job *batchv1.Job, sel labels.Selector) ([]*v1.Pod, error) {
	all, err := c.pods.Pods(job.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing pods of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	recheck := controllerref.Recheck(job, controllerKind.Kind, func(ctx context.Context) (metav1.Object, error) {
		return c.client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
	})
	return controllerref.NewPodManager(c.client.CoreV1(), job, controllerKind, sel, recheck, batchv1.JobTrackingFinalizer).ClaimPods(ctx, all)
}

func (c *Controller) patchPod(ctx context.Context, pod *v1.Pod, patch []byte) error {
	_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// removeFinalizerPatch drops only the tracking finalizer.
var removeFinalizerPatch = []byte(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["` + batchv1.JobTrackingFinalizer + `"]}}`)

// apply performs the plan in the order that keeps counting exact: persist
// newly finished pods as uncounted, remove their finalizers, then write the
// counted status; pod creates and deletes come in between.
func (c *Controller) apply(ctx context.Context, key string, job *batchv1.Job, p plan) error {
	api := c.client.BatchV1().Jobs(job.Namespace)
	if p.interim != nil {
		job.Status = *p.interim
		updated, err := api.UpdateStatus(ctx, job, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("recording finished pods of Job %s: %w", key, err)
		}
		job = updated
	}
	var errs []error
	for _, pod := range p.removeFinalizers {
		if err := c.patchPod(ctx, pod, removeFinalizerPatch); err != nil {
			errs = append(errs, err)
			continue
		}
		c.expectFinalizerRemoved(key, pod.UID)
	}
	if len(errs) > 0 {
		// The uncounted pods stay recorded; the next sync counts them.
		return errors.Join(errs...)
	}
	if len(p.creates) > 0 || len(p.deletes) > 0 {
		c.expectations.Expect(key, len(p.creates), len(p.deletes))
	}
	for _, pod := range p.deletes {
		err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		switch {
		case err == nil:
			c.recorder.Eventf(job, v1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", pod.Name)
		case apierrors.IsNotFound(err):
			c.expectations.Observe(key, 0, 1)
		default:
			c.expectations.Observe(key, 0, 1)
			c.recorder.Eventf(job, v1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
			errs = append(errs, fmt.Errorf("deleting pod %s/%s of Job %s: %w", pod.Namespace, pod.Name, key, err))
		}
	}
	for i, ix := range p.creates {
		created, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, newPod(job, ix, p.indexFailures[ix]), metav1.CreateOptions{})
		if err != nil {
			// Stop at the first failure: the rest would most likely fail
			// alike.
			c.expectations.Observe(key, len(p.creates)-i, 0)
			if apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
				break
			}
			c.recorder.Eventf(job, v1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
			errs = append(errs, fmt.Errorf("creating pod of Job %s: %w", key, err))
			p.status.Active -= int32(len(p.creates) - i)
			break
		}
		c.recorder.Eventf(job, v1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", created.Name)
	}
	if !reflect.DeepEqual(job.Status, p.status) {
		job.Status = p.status
		if _, err := api.UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
			return errors.Join(append(errs, fmt.Errorf("updating status of Job %s: %w", key, err))...)
		}
	}
	for _, e := range p.events {
		c.recorder.Event(job, e.eventType, e.reason, e.message)
	}
	if p.deleteJob {
		bg := metav1.DeletePropagationBackground
		err := api.Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &job.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting finished Job %s after its TTL: %w", key, err))
		}
	}
	if p.requeue > 0 {
		c.queue.AddAfter(key, p.requeue)
	}
	return errors.Join(errs...)
}
